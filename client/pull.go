package client

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// PullBatch is a pull answer kept in its wire form: the messages stay packed
// as commitlog records and are decoded one at a time by Next, so a consumer
// that only needs bodies and offsets allocates nothing per message. Use
// PullResult (Pull) for messages with their properties as a map.
type PullBatch struct {
	Status     PullStatus
	NextOffset int64
	MinOffset  int64
	MaxOffset  int64

	records []byte              // the unread rest of PullResponse.records
	stored  []*pb.StoredMessage // from a server that predates records
	scratch []byte              // properties re-encoded for stored messages
}

// PullBatch reads messages like Pull and returns them undecoded.
func (c *Client) PullBatch(ctx context.Context, req PullRequest) (*PullBatch, error) {
	in := &pb.PullRequest{Topic: req.Topic, QueueId: req.QueueID, Offset: req.Offset,
		MaxMessages: req.MaxMessages, MaxBytes: req.MaxBytes, MaxWaitMs: req.MaxWait.Milliseconds(),
		Tag: req.Tag, Records: true}
	var resp *pb.PullResponse
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.Pull(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &PullBatch{Status: resp.GetStatus(), NextOffset: resp.GetNextOffset(), MinOffset: resp.GetMinOffset(),
		MaxOffset: resp.GetMaxOffset(), records: resp.GetRecords(), stored: resp.GetMessages()}, nil
}

// Next decodes the next message. ok is false after the last one. The
// record's Body, Topic and Properties alias the batch (valid as long as the
// batch is referenced; copy them to change them). Every record is checked
// whole, body CRC included; err (matching message.ErrCorrupt) means the
// answer is damaged and the rest of the batch is dropped.
func (b *PullBatch) Next() (r message.Record, ok bool, err error) {
	if len(b.records) > 0 {
		r, err = message.DecodeRecord(b.records)
		if err != nil {
			b.records = nil
			return r, false, fmt.Errorf("client: pull answer: %w", err)
		}
		b.records = b.records[r.Size:]
		return r, true, nil
	}
	if len(b.stored) > 0 {
		m := b.stored[0]
		b.stored = b.stored[1:]
		return b.storedRecord(m), true, nil
	}
	return r, false, nil
}

// storedRecord converts a message of the older answer form.
func (b *PullBatch) storedRecord(m *pb.StoredMessage) message.Record {
	born, _ := message.ParseHostPort(m.GetBornHost())
	store, _ := message.ParseHostPort(m.GetStoreHost())
	b.scratch = b.scratch[:0]
	for _, p := range m.GetProperties() {
		b.scratch = append(b.scratch, p.GetKey()...)
		b.scratch = append(b.scratch, 1)
		b.scratch = append(b.scratch, p.GetValue()...)
		b.scratch = append(b.scratch, 2)
	}
	props := bytes.Clone(b.scratch)
	return message.Record{
		Size:    int32(message.RecordSize(len(m.GetBody()), len(m.GetTopic()), len(props))),
		BodyCRC: m.GetBodyCrc(), QueueID: m.GetQueueId(), Flag: m.GetFlag(),
		QueueOffset: m.GetQueueOffset(), PhysicalOffset: m.GetPhysicalOffset(), SysFlag: m.GetSysFlag(),
		BornTimestamp: m.GetBornTimestamp(), BornHost: born, StoreTimestamp: m.GetStoreTimestamp(),
		StoreHost: store, ReconsumeTimes: m.GetReconsumeTimes(), PreparedTxOffset: m.GetPreparedTxOffset(),
		Body: m.GetBody(), Topic: []byte(m.GetTopic()), Properties: props,
	}
}

// Messages decodes the rest of the batch.
func (b *PullBatch) Messages() ([]ReceivedMessage, error) {
	out := make([]ReceivedMessage, 0, len(b.stored)+len(b.records)/message.RecordFixedSize/8)
	for {
		r, ok, err := b.Next()
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, fromRecord(&r))
	}
}

// fromRecord is the ReceivedMessage of a record; Body aliases r.Body.
func fromRecord(r *message.Record) ReceivedMessage {
	props := decodeProperties(r.Properties)
	off := message.OffsetMsgID(r.StoreHost, r.PhysicalOffset)
	id := props[message.PropertyUniqKey]
	if id == "" {
		id = off
	}
	return ReceivedMessage{
		Topic: string(r.Topic), QueueID: r.QueueID, QueueOffset: r.QueueOffset,
		PhysicalOffset: r.PhysicalOffset, MsgID: id, OffsetMsgID: off,
		StoreTimestamp: r.StoreTimestamp, BornTimestamp: r.BornTimestamp,
		BornHost: r.BornHost.String(), StoreHost: r.StoreHost.String(),
		Flag: r.Flag, SysFlag: r.SysFlag, ReconsumeTimes: r.ReconsumeTimes, BodyCRC: r.BodyCRC,
		Tags: props[message.PropertyTags], Keys: strings.Fields(props[message.PropertyKeys]),
		Properties: props, Body: r.Body,
	}
}

// decodeProperties is the map of RocketMQ-encoded properties
// (message.Properties; a later pair with the same key wins).
func decodeProperties(b []byte) map[string]string {
	props := make(map[string]string, bytes.Count(b, []byte{2})+1)
	for k, v := range message.Properties(b) {
		props[string(k)] = string(v)
	}
	return props
}
