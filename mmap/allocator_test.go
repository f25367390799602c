package mmap

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

func TestAllocatorPreparesAhead(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			fsys, dir := im.fs(t)
			a := NewAllocator(fsys, AllocatorOptions{PreTouch: true})
			q := openQ(t, fsys, dir, a)
			seg, err := q.Roll() // synchronous; queues the next one
			must(t, err)
			a.waitIdle()
			names, _ := fsys.List(dir)
			if !slices.Equal(names, []string{FileName(0), FileName(qsize)}) {
				t.Fatalf("after first roll: %v", names)
			}
			prepared := a.reqs[filepath.Join(dir, FileName(qsize))]
			if prepared == nil || prepared.file == nil {
				t.Fatal("next file not prepared")
			}
			seg, err = q.Roll()
			must(t, err)
			if seg.File != prepared.file {
				t.Fatal("Roll did not take the prepared file")
			}
			a.waitIdle()
			names, _ = fsys.List(dir)
			if len(names) != 3 {
				t.Fatalf("next-next not prepared: %v", names)
			}
			must(t, a.Close()) // deletes the untaken file
			names, _ = fsys.List(dir)
			if !slices.Equal(names, []string{FileName(0), FileName(qsize)}) {
				t.Fatalf("after Close: %v", names)
			}
			if _, err := q.Roll(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Roll with a closed allocator: %v", err)
			}
			must(t, q.Close())
		})
	}
}

func TestAllocatorCloseWhilePending(t *testing.T) {
	m := vfs.NewMem()
	a := NewAllocator(m, AllocatorOptions{})
	for i := 0; i < 5; i++ {
		f, err := a.Get("/"+FileName(int64(i)*qsize), qsize, "/"+FileName(int64(i+1)*qsize))
		must(t, err)
		must(t, f.Close())
	}
	must(t, a.Close())
	names, _ := m.List("/")
	if len(names) != 5 {
		t.Fatalf("files left: %v", names)
	}
	if err := a.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAllocatorFailureFallsBack: a failed preparation is retried
// synchronously by Get.
func TestAllocatorFailureFallsBack(t *testing.T) {
	m := vfs.NewMem()
	fsys := vfs.WithInjector(m, vfs.OnKind(vfs.OpCreate, 1)) // the background create
	a := NewAllocator(fsys, AllocatorOptions{})
	defer a.Close()
	f, err := a.Get("/a", qsize, "/b")
	must(t, err)
	must(t, f.Close())
	a.waitIdle()
	g, err := a.Get("/b", qsize, "")
	must(t, err)
	must(t, g.Close())
}
