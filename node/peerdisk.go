package node

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// peerDiskInterval is how often a leader asks its peers how full their disks
// are (a follower's disk may fill faster than the leader's: the headroom
// above the warning ratio must outlast this interval of writes); a report
// older than peerDiskStale no longer counts.
const (
	peerDiskInterval = 250 * time.Millisecond
	peerDiskStale    = 8 * peerDiskInterval
)

// diskReport is a peer's answer: its used disk share and when it came.
type diskReport struct {
	usedPercent int
	at          time.Time
}

// peerDisks holds the leader's latest disk report from each peer (asked
// through the peers' Status RPC), so that a send is refused before it is
// proposed when fewer than a quorum of voters have room to store it: a
// follower whose disk is full cannot apply the entry, and a quorum of such
// followers cannot even append it to their Raft logs.
type peerDisks struct {
	mu      sync.Mutex
	reports map[string]diskReport // by server ID
	conns   map[string]*grpc.ClientConn
	// dialOpts dial a peer's API (security.peerDialOptions; plain text
	// until the node sets its own).
	dialOpts []grpc.DialOption
}

func newPeerDisks() *peerDisks {
	return &peerDisks{reports: map[string]diskReport{}, conns: map[string]*grpc.ClientConn{},
		dialOpts: security{}.peerDialOptions()}
}

// run polls the peers while this node leads, until stop closes.
func (p *peerDisks) run(n *Node) {
	defer p.closeConns()
	t := time.NewTicker(peerDiskInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.raft.State() == raft.Leader {
			p.poll(n)
		}
	}
}

// poll asks every other member for its status, in parallel, each bounded
// by the poll interval; an unreachable peer keeps its older report until
// it goes stale.
func (p *peerDisks) poll(n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), peerDiskInterval)
	defer cancel()
	members := n.fsm.Members()
	p.dropConnsExcept(members)
	p.askStatus(ctx, n.cfg.ID, members, nil, func(id string, resp *pb.StatusResponse) {
		p.mu.Lock()
		p.reports[id] = diskReport{usedPercent: int(resp.GetDiskUsedPercent()), at: time.Now()}
		p.mu.Unlock()
	})
}

// askStatus asks every member but self and those skip names (nil: none)
// for its Status, in parallel within ctx, and hands got each answer that
// came from the member asked; got runs on several goroutines at once.
func (p *peerDisks) askStatus(ctx context.Context, self string, members map[string]string, skip func(id string) bool,
	got func(id string, resp *pb.StatusResponse)) {
	var wg sync.WaitGroup
	for id, addr := range members {
		if id == self || addr == "" || (skip != nil && skip(id)) {
			continue
		}
		cc, err := p.conn(addr)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := pb.NewRaftMQClient(cc).Status(ctx, &pb.StatusRequest{}); err == nil && resp.GetId() == id {
				got(id, resp)
			}
		}()
	}
	wg.Wait()
}

func (p *peerDisks) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.dialOpts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

// dropConnsExcept closes the connections to addresses no member has any
// more (a removed member, a member that moved its API address).
func (p *peerDisks) dropConnsExcept(members map[string]string) {
	live := make(map[string]bool, len(members))
	for _, addr := range members {
		live[addr] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, cc := range p.conns {
		if !live[addr] {
			_ = cc.Close()
			delete(p.conns, addr)
		}
	}
}

func (p *peerDisks) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, cc := range p.conns {
		_ = cc.Close()
		delete(p.conns, addr)
	}
}

// full lists the peers whose fresh report is at or above limit. A peer
// without a fresh report counts as having room: refusing on no news would
// stop every send for a poll interval after each election.
func (p *peerDisks) full(limit int, now time.Time) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out map[string]int
	for id, r := range p.reports {
		if now.Sub(r.at) < peerDiskStale && r.usedPercent >= limit {
			if out == nil {
				out = map[string]int{}
			}
			out[id] = r.usedPercent
		}
	}
	return out
}
