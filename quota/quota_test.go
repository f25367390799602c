package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPacesHoldsAndRefuses(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	l := New(Config{MessagesPerSecond: 100, BytesPerSecond: 1000}, func() time.Time { return now })
	ctx := context.Background()
	if err := l.Send(ctx, "user:a", 100, 100); err != nil {
		t.Fatal(err)
	}
	// One more message: held 10 ms for its token.
	start := time.Now()
	if err := l.Send(ctx, "user:a", 1, 1); err != nil {
		t.Fatal(err)
	}
	if held := time.Since(start); held < 5*time.Millisecond {
		t.Errorf("a send over the rate was held %v, want ≈10ms", held)
	}
	// 150 more need 1.5 s: refused, naming the client and the rate.
	err := l.Send(ctx, "user:a", 150, 1)
	if !errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), "user:a may send 100 messages per second") {
		t.Fatalf("150 over: %v", err)
	}
	// Another client has its own buckets; bytes are bounded too.
	if err := l.Send(ctx, "user:b", 100, 1000); err != nil {
		t.Fatal(err)
	}
	if err := l.Send(ctx, "user:b", 1, 2000); !errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), "body bytes") {
		t.Fatalf("bytes over: %v", err)
	}
	// The refused send took nothing: a second later a's bucket holds the
	// 99 tokens its held send left.
	now = now.Add(time.Second)
	if err := l.Send(ctx, "user:a", 99, 1); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Throttled != 1 || st.Refused != 2 {
		t.Errorf("stats %+v, want 1 throttled and 2 refused", st)
	}
	// A new client's first request may exceed a second's worth; the next
	// waits for what it took.
	if err := l.Send(ctx, "user:c", 500, 1); err != nil {
		t.Fatalf("a new client's first request of 5 s worth: %v", err)
	}
	if err := l.Send(ctx, "user:c", 150, 1); !errors.Is(err, ErrExceeded) {
		t.Fatalf("right after 5 s worth: %v", err)
	}
}

func TestRefusalDelayAndDeadline(t *testing.T) {
	now := time.Now()
	l := New(Config{MessagesPerSecond: 10, RefusalDelay: 50 * time.Millisecond}, func() time.Time { return now })
	ctx := context.Background()
	if err := l.Send(ctx, "ip:1", 10, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := l.Send(ctx, "ip:1", 100, 0); !errors.Is(err, ErrExceeded) {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("refusal answered after %v, want ≥ 50ms", d)
	}
	// A wait longer than the caller's deadline is refused, not held.
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Send(dctx, "ip:1", 5, 0); !errors.Is(err, ErrExceeded) {
		t.Fatalf("a 0.5 s wait with a 20 ms deadline: %v", err)
	}
	// A held send ends with its context.
	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); ccancel() }()
	if err := l.Send(cctx, "ip:1", 5, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while held: %v", err)
	}
}

func TestOffAndNil(t *testing.T) {
	if New(Config{}, nil) != nil {
		t.Fatal("a limiter without rates")
	}
	var l *Limiter
	if err := l.Send(context.Background(), "x", 1<<20, 1<<30); err != nil || l.Stats() != (Stats{}) {
		t.Fatal("a nil limiter refused or counted")
	}
}

// A client with rates of its own is paced at them; the others at the
// configured rates (or not at all); a changed rate applies at once.
func TestPerClientRates(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	l := New(Config{PerClient: true}, func() time.Time { return now })
	if err := l.SendAt(ctx, "user:free", Rates{}, 1_000_000, 1<<30); err != nil {
		t.Fatalf("a client without rates: %v", err)
	}
	slow := Rates{MessagesPerSecond: 10}
	if err := l.SendAt(ctx, "user:slow", slow, 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.SendAt(ctx, "user:slow", slow, 20, 0); !errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), "10 messages per second") {
		t.Fatalf("over its own rate: %v", err)
	}
	if err := l.SendAt(ctx, "user:slow", Rates{MessagesPerSecond: 1000}, 20, 0); err != nil {
		t.Fatalf("after its rate was raised: %v", err)
	}
	d := New(Config{MessagesPerSecond: 5}, func() time.Time { return now })
	if err := d.SendAt(ctx, "user:vip", Rates{MessagesPerSecond: 100}, 100, 0); err != nil {
		t.Fatalf("a client whose own rate is above the default: %v", err)
	}
	if err := d.Send(ctx, "user:other", 100, 0); err != nil {
		t.Fatalf("a new client's first request: %v", err)
	}
	if err := d.Send(ctx, "user:other", 10, 0); !errors.Is(err, ErrExceeded) {
		t.Fatalf("the default rate: %v", err)
	}
}
