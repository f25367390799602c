// Package testseed gives randomised tests one seed source: the -seed test
// flag, else RAFTMQ_SEED, else the clock. The seed is logged so a failure can
// be replayed with -seed=N. Import it from _test.go files only.
package testseed

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
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

// WriteFuzzSeed writes data as seed file seedNN of the fuzz target's corpus
// in testdata/fuzz/<target> (the format `go test` reads).
func WriteFuzzSeed(t testing.TB, target string, n int, data []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", n)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
