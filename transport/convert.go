package transport

import (
	"github.com/raftmq/raftmq/commitlog"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

// toLogMessage converts a validated request message. Defaults (queue, born
// timestamp, born host) were filled in by fillDefaults.
func toLogMessage(m *pb.Message) commitlog.Message {
	host, _ := ParseHostPort(m.GetBornHost())
	return commitlog.Message{
		Topic:         m.GetTopic(),
		QueueID:       m.GetQueueId(),
		Flag:          m.GetFlag(),
		BornTimestamp: m.GetBornTimestamp(),
		BornHost:      host,
		Body:          m.GetBody(),
		Properties:    EncodeProperties(m.GetProperties()),
	}
}

func fromPutResult(r store.PutResult) *pb.SendResult {
	out := &pb.SendResult{
		Topic:          r.Topic,
		QueueId:        r.QueueID,
		QueueOffset:    r.QueueOffset,
		PhysicalOffset: r.PhysicalOffset,
		MsgId:          r.MsgID,
		OffsetMsgId:    r.OffsetMsgID,
		StoreTimestamp: r.StoreTimestamp,
		Size:           r.Size,
	}
	if r.Err != nil {
		st, _ := statusOf(toStatus(r.Err))
		out.ErrorCode = int32(st.Code())
		out.Error = st.Message()
	}
	return out
}

// FromStoreMessage converts a stored message for the wire.
func FromStoreMessage(m store.Message) *pb.StoredMessage {
	props := DecodeProperties(m.Properties)
	off := OffsetMsgID(m.StoreHost, m.PhysicalOffset)
	id := PropertyValue(props, PropUniqKey)
	if id == "" {
		id = off
	}
	return &pb.StoredMessage{
		Topic:            m.Topic,
		QueueId:          m.QueueID,
		QueueOffset:      m.QueueOffset,
		PhysicalOffset:   m.PhysicalOffset,
		Flag:             m.Flag,
		SysFlag:          m.SysFlag,
		BornTimestamp:    m.BornTimestamp,
		BornHost:         FormatHostPort(m.BornHost),
		StoreTimestamp:   m.StoreTimestamp,
		StoreHost:        FormatHostPort(m.StoreHost),
		ReconsumeTimes:   m.ReconsumeTimes,
		PreparedTxOffset: m.PreparedTxOffset,
		BodyCrc:          m.BodyCRC,
		Body:             m.Body,
		Properties:       props,
		MsgId:            id,
		OffsetMsgId:      off,
	}
}

func fromStoreMessages(ms []store.Message) []*pb.StoredMessage {
	out := make([]*pb.StoredMessage, len(ms))
	for i, m := range ms {
		out[i] = FromStoreMessage(m)
	}
	return out
}

func fromClusterStatus(s ClusterStatus) *pb.StatusResponse {
	out := &pb.StatusResponse{
		Id: s.ID, State: s.State, LeaderId: s.LeaderID,
		LeaderRaftAddr: s.LeaderRaftAddr, LeaderApiAddr: s.LeaderAPIAddr,
		Term: s.Term, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex,
		ConfirmOffset: s.ConfirmOffset, MinOffset: s.MinOffset, MaxOffset: s.MaxOffset,
	}
	for _, m := range s.Members {
		out.Members = append(out.Members, &pb.Member{Id: m.ID, RaftAddr: m.RaftAddr, ApiAddr: m.APIAddr, Suffrage: m.Suffrage})
	}
	return out
}

// pullStatus maps store.GetStatus to the wire enum (value + 1).
func pullStatus(s store.GetStatus) pb.PullStatus {
	if s < store.Found || s > store.NoMessageInQueue {
		return pb.PullStatus_PULL_STATUS_UNSPECIFIED
	}
	return pb.PullStatus(int32(s) + 1)
}
