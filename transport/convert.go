package transport

import (
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

// toLogMessage converts a validated request message. Defaults (queue, born
// timestamp, born host) were filled in by fillDefaults.
func toLogMessage(m *pb.Message) message.Message {
	host, _ := message.ParseHostPort(m.GetBornHost())
	return message.Message{
		Topic:         m.GetTopic(),
		QueueID:       m.GetQueueId(),
		Flag:          m.GetFlag(),
		BornTimestamp: m.GetBornTimestamp(),
		BornHost:      host,
		Body:          m.GetBody(),
		Properties:    EncodeProperties(m.GetProperties()),
	}
}

// toLogMessages converts the validated messages of a Send request with a
// constant number of allocations: the properties of all messages are encoded
// into one buffer, and a born host repeated from the previous message is not
// parsed again.
func toLogMessages(in []*pb.Message) []message.Message {
	size := 0
	for _, m := range in {
		for _, p := range m.GetProperties() {
			size += len(p.GetKey()) + len(p.GetValue()) + 2
		}
	}
	props := make([]byte, 0, size)
	out := make([]message.Message, len(in))
	var lastHost string
	var host message.HostPort
	for i, m := range in {
		if h := m.GetBornHost(); h != lastHost || i == 0 {
			host, _ = message.ParseHostPort(h)
			lastHost = h
		}
		start := len(props)
		props = appendProperties(props, m.GetProperties())
		var p []byte
		if len(props) > start { // nil when there are none, as EncodeProperties
			p = props[start:len(props):len(props)]
		}
		out[i] = message.Message{
			Topic:         m.GetTopic(),
			QueueID:       m.GetQueueId(),
			Flag:          m.GetFlag(),
			BornTimestamp: m.GetBornTimestamp(),
			BornHost:      host,
			Body:          m.GetBody(),
			Properties:    p,
		}
	}
	return out
}

// fromPutResults converts the results of a Send, allocating them together.
func fromPutResults(rs []store.PutResult) []*pb.SendResult {
	vals := make([]pb.SendResult, len(rs))
	out := make([]*pb.SendResult, len(rs))
	for i, r := range rs {
		fillSendResult(&vals[i], r)
		out[i] = &vals[i]
	}
	return out
}

func fillSendResult(out *pb.SendResult, r store.PutResult) {
	out.Topic, out.QueueId, out.QueueOffset, out.PhysicalOffset = r.Topic, r.QueueID, r.QueueOffset, r.PhysicalOffset
	out.MsgId, out.OffsetMsgId, out.StoreTimestamp, out.Size = r.MsgID, r.OffsetMsgID, r.StoreTimestamp, r.Size
	if r.Err != nil {
		st, _ := statusOf(toStatus(r.Err))
		out.ErrorCode = int32(st.Code())
		out.Error = st.Message()
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
	out := new(pb.StoredMessage)
	fillStoredMessage(out, &m, m.StoreHost.String())
	return out
}

// fillStoredMessage fills out from m; storeHost is m.StoreHost formatted
// (the same for every message a node returns, so callers format it once).
func fillStoredMessage(out *pb.StoredMessage, m *store.Message, storeHost string) {
	props := DecodeProperties(m.Properties)
	off := message.OffsetMsgID(m.StoreHost, m.PhysicalOffset)
	id := PropertyValue(props, message.PropertyUniqKey)
	if id == "" {
		id = off
	}
	out.Topic = m.Topic
	out.QueueId = m.QueueID
	out.QueueOffset = m.QueueOffset
	out.PhysicalOffset = m.PhysicalOffset
	out.Flag = m.Flag
	out.SysFlag = m.SysFlag
	out.BornTimestamp = m.BornTimestamp
	out.BornHost = m.BornHost.String()
	out.StoreTimestamp = m.StoreTimestamp
	out.StoreHost = storeHost
	out.ReconsumeTimes = m.ReconsumeTimes
	out.PreparedTxOffset = m.PreparedTxOffset
	out.BodyCrc = m.BodyCRC
	out.Body = m.Body
	out.Properties = props
	out.MsgId = id
	out.OffsetMsgId = off
}

// fromStoreMessages converts ms with one allocation for all the message
// structs and one formatted store host per distinct host.
func fromStoreMessages(ms []store.Message) []*pb.StoredMessage {
	out := make([]*pb.StoredMessage, len(ms))
	structs := make([]pb.StoredMessage, len(ms))
	var host message.HostPort
	var hostStr string
	for i := range ms {
		m := &ms[i]
		if i == 0 || m.StoreHost != host {
			host, hostStr = m.StoreHost, m.StoreHost.String()
		}
		fillStoredMessage(&structs[i], m, hostStr)
		out[i] = &structs[i]
	}
	return out
}

func fromClusterStatus(s wire.ClusterStatus) *pb.StatusResponse {
	out := &pb.StatusResponse{
		Id: s.ID, State: s.State, LeaderId: s.LeaderID,
		LeaderRaftAddr: s.LeaderRaftAddr, LeaderApiAddr: s.LeaderAPIAddr,
		Term: s.Term, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex,
		ConfirmOffset: s.ConfirmOffset, MinOffset: s.MinOffset, MaxOffset: s.MaxOffset,
		DiskUsedPercent: int32(s.DiskUsedPercent),
		RemotingAddr:    s.RemotingAddr,
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
