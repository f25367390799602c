package remoting

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestClientInvoke: concurrent Invokes on one client each get their own
// answer; a one-way Invoke returns at once; a server that goes away fails
// what is pending and every later Invoke.
func TestClientInvoke(t *testing.T) {
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, conn *Conn, req *Command) *Command {
		if req.Code == 2 { // blocks until the test lets go or the server closes
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return echo(ctx, conn, &Command{Code: 1, Opaque: req.Opaque, ExtFields: req.ExtFields, Body: req.Body, Serialize: req.Serialize})
	})
	s, addr := testServer(t, h, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := string(rune('A' + i%26))
			resp, err := c.Invoke(ctx, &Command{Code: 1, ExtFields: map[string]string{"v": want}, Serialize: Serialize(i % 2)})
			if err != nil || resp.Field("v") != want || resp.Serialize != Serialize(i%2) {
				t.Errorf("invoke %d: %v, %v", i, resp, err)
			}
		}()
	}
	wg.Wait()
	if resp, err := c.Invoke(ctx, &Command{Code: 1, Flag: FlagOneway}); resp != nil || err != nil {
		t.Fatalf("one-way: %v, %v", resp, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := c.Invoke(short, &Command{Code: 2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked request past its deadline: %v", err)
	}
	cancelShort()
	pending := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, &Command{Code: 2})
		pending <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-pending; !errors.Is(err, ErrClientClosed) {
		t.Fatalf("pending invoke when the server closed: %v", err)
	}
	if _, err := c.Invoke(ctx, &Command{Code: 1}); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("invoke after the connection ended: %v", err)
	}
	close(release)
}
