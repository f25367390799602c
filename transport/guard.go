package transport

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/auth"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/tlsconf"
)

// MetadataAuthorization carries a bearer token: "Bearer <token>".
const MetadataAuthorization = "authorization"

// guard authenticates and authorizes every RPC (when the server has an
// Authenticator) and applies the quotas (when it has Quotas). The health
// service is always open: load balancers and orchestrators probe it.
type guard struct {
	s      *Server
	auth   *auth.Authenticator // nil: no authentication
	quotas *quotas             // nil: no limits
	denied atomic.Uint64       // unauthenticated or unauthorized RPCs
}

// GuardStats count what the guard refused.
type GuardStats struct {
	Denied  uint64 // RPCs refused as unauthenticated or not permitted
	Limited uint64 // RPCs refused by a quota (RESOURCE_EXHAUSTED)
	// Throttled counts sends held (up to a second) until their client's
	// produce rate allowed them.
	Throttled uint64
}

// GuardStats returns the guard's counters.
func (s *Server) GuardStats() GuardStats {
	st := GuardStats{Denied: s.guard.denied.Load()}
	if s.guard.quotas != nil {
		st.Limited = s.guard.quotas.limited.Load()
		st.Throttled = s.guard.quotas.lim.Produce.Stats().Throttled
	}
	return st
}

const healthPrefix = "/grpc.health.v1.Health/"

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return h(ctx, req)
	}
	p, err := g.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.authorize(p, req); err != nil {
		return nil, err
	}
	release, err := g.admit(ctx, p, req)
	if err != nil {
		return nil, err
	}
	defer release()
	resp, err := h(ctx, req)
	if q, ok := resp.(*pb.QueryMessagesResponse); ok && err == nil && p != nil {
		filterReadable(p, q)
	}
	return resp, err
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return h(srv, ss)
	}
	// Reflection (the only other stream): any authenticated principal.
	if _, err := g.authenticate(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// authenticate returns the caller (nil when the server has no
// Authenticator): a bearer token, else a verified client certificate.
func (g *guard) authenticate(ctx context.Context) (*auth.Principal, error) {
	if g.auth == nil {
		return nil, nil
	}
	var (
		p   *auth.Principal
		err error
	)
	if tok, ok := bearer(ctx); ok {
		p, err = g.auth.Token(tok)
	} else if cn := peerCertName(ctx); cn != "" {
		p, err = g.auth.Cert(cn)
	} else {
		p, err = g.auth.Token("")
	}
	if err != nil {
		g.denied.Add(1)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return p, nil
}

func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(MetadataAuthorization) {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(tok), true
		}
	}
	return "", false
}

func peerCertName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	return tlsconf.PeerName(&ti.State)
}

// check is one permission a request needs.
type check struct {
	role     auth.Role
	resource string
}

// authorize checks every permission req needs (none without an
// Authenticator).
func (g *guard) authorize(p *auth.Principal, req any) error {
	if g.auth == nil {
		return nil
	}
	for _, c := range needs(req) {
		if err := p.Check(c.role, c.resource); err != nil {
			g.denied.Add(1)
			return status.Error(codes.PermissionDenied, err.Error())
		}
	}
	return nil
}

// needs lists the permissions of a request by its type. A request type not
// listed needs the admin role, so a new RPC is closed until placed here.
func needs(req any) []check {
	switch r := req.(type) {
	case *pb.SendRequest:
		var cs []check
		seen := map[string]bool{}
		for _, m := range r.GetMessages() {
			if t := m.GetTopic(); !seen[t] {
				seen[t] = true
				cs = append(cs, check{auth.Produce, t})
			}
		}
		return cs
	case *pb.PullRequest:
		return []check{{auth.Consume, r.GetTopic()}}
	case *pb.QueueOffsetsRequest:
		return []check{{auth.Consume, r.GetTopic()}}
	case *pb.OffsetByTimeRequest:
		return []check{{auth.Consume, r.GetTopic()}}
	case *pb.QueryByKeyRequest:
		return []check{{auth.Consume, r.GetTopic()}}
	case *pb.QueryByMsgIDRequest:
		if r.GetTopic() == "" {
			return []check{{auth.Read, ""}} // answers filtered by filterReadable
		}
		return []check{{auth.Consume, r.GetTopic()}}
	case *pb.QueryByOffsetRequest:
		return []check{{auth.Read, ""}} // answers filtered by filterReadable
	case *pb.CommitOffsetRequest:
		var cs []check
		for _, c := range r.GetCommits() {
			cs = append(cs, check{auth.Consume, c.GetTopic()}, check{auth.Group, c.GetGroup()})
		}
		return cs
	case *pb.QueryOffsetRequest:
		return []check{{auth.Consume, r.GetTopic()}, {auth.Group, r.GetGroup()}}
	case *pb.JoinGroupRequest:
		return []check{{auth.Group, r.GetGroup()}}
	case *pb.DescribeGroupRequest:
		return []check{{auth.Group, r.GetGroup()}}
	case *pb.ListGroupsRequest, *pb.ListTopicsRequest, *pb.DescribeTopicRequest, *pb.StatusRequest:
		return []check{{auth.Read, ""}}
	}
	return []check{{auth.Admin, ""}}
}

// filterReadable drops the messages of topics p may not consume from a
// query that named no topic.
func filterReadable(p *auth.Principal, q *pb.QueryMessagesResponse) {
	kept := q.Messages[:0]
	for _, m := range q.GetMessages() {
		if p.Allowed(auth.Consume, m.GetTopic()) {
			kept = append(kept, m)
		}
	}
	q.Messages = kept
}

// admit applies the quotas to req; release ends what it holds (a long poll).
func (g *guard) admit(ctx context.Context, p *auth.Principal, req any) (release func(), err error) {
	if g.quotas == nil {
		return func() {}, nil
	}
	return g.quotas.admit(ctx, g.s, p, clientKey(ctx, p), req)
}

// clientKey names the client a quota counts: the principal, or without
// authentication the peer's IP address.
func clientKey(ctx context.Context, p *auth.Principal) string {
	if p != nil {
		return "user:" + p.Name
	}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		host := pr.Addr.String()
		if i := strings.LastIndexByte(host, ':'); i > 0 {
			host = host[:i]
		}
		return "ip:" + host
	}
	return "unknown"
}
