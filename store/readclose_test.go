package store

import (
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// Reads racing Close either fail (ErrClosed) or return every message they
// step over: a closing store must never look like retention, which would
// make a consumer skip messages silently.
func TestReadRacingCloseNeverSkips(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 30; round++ {
		s := mustOpen(t, vfs.NewMem(), smallConfig("/s"))
		const n = 200
		for i := 0; i < n; i += 10 {
			msgs := make([]message.Message, 10)
			for j := range msgs {
				msgs[j] = testMessage("T", 0, i+j, nil)
			}
			if _, err := s.AppendMessages(header(uint64(i/10+1)), msgs, nil); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []string
		stop := make(chan struct{})
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := int64(0); ; off = (off + 7) % n {
					select {
					case <-stop:
						return
					default:
					}
					res, err := s.GetMessages("T", 0, off, 16, 0, "")
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							mu.Lock()
							bad = append(bad, err.Error())
							mu.Unlock()
						}
						continue
					}
					if res.NextOffset-off != int64(len(res.Messages)) {
						mu.Lock()
						bad = append(bad, "skipped")
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(rng.Intn(2000)) * time.Microsecond) // when Close lands: the race under test
		_ = s.Close()
		close(stop)
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("seed %d round %d: %d reads racing Close went wrong, e.g. %q", seed, round, len(bad), bad[0])
		}
	}
}
