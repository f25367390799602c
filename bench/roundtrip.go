package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
)

// roundTripCalls is how many read RPCs one round-trip measurement times,
// after as many untimed ones (connection set-up, leader discovery).
const roundTripCalls = 2000

// rpcRoundTrip is the p50 in ms of a read RPC with no Raft behind it
// (QueueOffsets of one queue) from this process to the raftmq leader over
// gRPC, the same hop a synchronous send from the CLI takes. The ceiling's
// load runs inside its leader and does not pay it, so ceiling p50 + this is
// the fastest a synchronous send can be answered with the client protocol
// as it is (see judgeSyncFloor).
func (r *runner) rpcRoundTrip(ctx context.Context) (float64, error) {
	c, err := client.New(ctx, r.mq.APIAddrs(), client.Options{})
	if err != nil {
		return 0, fmt.Errorf("round trip: %w", err)
	}
	defer func() { _ = c.Close() }()
	took := make([]time.Duration, 0, roundTripCalls)
	for i := 0; i < 2*roundTripCalls; i++ {
		start := time.Now()
		if _, _, err := c.MinMaxOffset(ctx, topic1K, 0); err != nil {
			return 0, fmt.Errorf("round trip: %w", err)
		}
		if i >= roundTripCalls {
			took = append(took, time.Since(start))
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return float64(took[len(took)/2].Microseconds()) / 1000, nil
}

// judgeSyncFloor notes on the synchronous row what its ratio can be at
// best: the ceiling's p50 plus the client's round trip, over the ceiling.
func judgeSyncFloor(row *Row, roundTrips []float64) {
	if len(roundTrips) == 0 || row.Ceiling <= 0 {
		return
	}
	sort.Float64s(roundTrips)
	row.RoundTripMs = roundTrips[len(roundTrips)/2]
	row.Note = strings.TrimSpace(row.Note + fmt.Sprintf(" Client→leader gRPC round trip of a read (no Raft) p50 %.2f ms, which the in-process ceiling does not pay: ceiling + round trip = %.2f × the ceiling.",
		row.RoundTripMs, (row.Ceiling+row.RoundTripMs)/row.Ceiling))
}
