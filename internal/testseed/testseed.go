// Package testseed gives randomised tests one seed source: the -seed test
// flag, else RAFTMQ_SEED, else the clock. The seed is logged so a failure can
// be replayed with -seed=N. Import it from _test.go files only.
package testseed

import (
	"flag"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomised tests (0: RAFTMQ_SEED or the clock)")

// Seed returns the seed for a randomised test and logs it.
func Seed(t testing.TB) int64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		if v, err := strconv.ParseInt(os.Getenv("RAFTMQ_SEED"), 10, 64); err == nil {
			seed = v
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d or RAFTMQ_SEED=%d)", seed, seed, seed)
	return seed
}
