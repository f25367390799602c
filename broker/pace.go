package broker

import (
	"context"
	"errors"
	"net"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/remoting"
)

// pace applies Options.Produce to a send: nil when admitted (possibly
// after being held), else the SYSTEM_BUSY answer. Relayed sends and other
// nodes are not paced again.
func (b *Broker) pace(ctx context.Context, conn *remoting.Conn, req *remoting.Command, p *auth.Principal) *remoting.Command {
	if b.o.Produce == nil || req.Field(relayedField) != "" || (p != nil && p.Node) {
		return nil
	}
	h, err := remoting.ParseSendHeader(req)
	if err != nil {
		return nil // the send answers it
	}
	msgs, err := sendMessages(req, h, bornHost(conn.RemoteAddr()))
	if err != nil {
		return nil
	}
	size := 0
	for _, m := range msgs {
		size += len(m.Body)
	}
	rm, rb := p.ProduceRates()
	err = b.o.Produce.SendAt(ctx, paceClient(conn, p), quota.Rates{MessagesPerSecond: rm, BytesPerSecond: rb}, len(msgs), size)
	if err == nil {
		return nil
	}
	if errors.Is(err, quota.ErrExceeded) {
		b.stats.limited.Add(1)
	}
	return req.Response(remoting.CodeSystemBusy, err.Error())
}

// paceClient names a client as the gRPC API does.
func paceClient(conn *remoting.Conn, p *auth.Principal) string {
	if p != nil {
		return "user:" + p.Name
	}
	if conn != nil {
		if tcp, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
			return "ip:" + tcp.IP.String()
		}
	}
	return "unknown"
}
