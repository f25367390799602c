package vfs

import (
	"errors"
	"math/rand"
	"testing"
)

func TestOnIndex(t *testing.T) {
	m := NewMem()
	e := WithInjector(m, OnIndex(2))
	must(t, e.MkdirAll("/x", 0o755)) // op 0
	f, err := e.Create("/x/f")       // op 1
	must(t, err)
	if _, err := f.WriteAt([]byte("a"), 0); !errors.Is(err, ErrInjected) { // op 2
		t.Fatalf("op 2: %v", err)
	}
	if got, _ := m.ReadFile("/x/f"); len(got) != 0 {
		t.Fatal("a failed write reached the file")
	}
	if _, err := f.WriteAt([]byte("a"), 0); err != nil { // op 3
		t.Fatalf("op 3 failed: %v", err)
	}
}

func TestOnKind(t *testing.T) {
	m := NewMem()
	e := WithInjector(m, OnKind(OpSync, 1))
	f, err := e.Create("/f")
	must(t, err)
	must(t, f.Sync())
	err = f.Sync()
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("second sync: %v", err)
	}
	must(t, f.Sync())
	must(t, e.SyncDir("/"))
}

func TestRandomly(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	m := NewMem()
	e := WithInjector(m, Randomly(r, 0.5, OpWrite))
	f, err := e.Create("/f")
	must(t, err)
	fails := 0
	for i := 0; i < 200; i++ {
		if _, err := f.WriteAt([]byte{1}, int64(i)); err != nil {
			if !errors.Is(err, ErrInjected) {
				t.Fatal(err)
			}
			fails++
		}
		must(t, f.Sync()) // not a listed kind: never fails
	}
	if fails < 50 || fails > 150 {
		t.Fatalf("%d of 200 writes failed at p=0.5", fails)
	}
}
