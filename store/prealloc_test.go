package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

// commitlogFiles lists the segment files of a store dir.
func commitlogFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, commitLogDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	return names
}

// copyImage copies the regular files under src to dst (a crash image of a
// store whose writes are all in the page cache).
func copyImage(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPreallocateSegments: with PreallocateSegments = k the allocator keeps
// k segments prepared ahead of the one being written (0: none), a clean
// close deletes them, and a crash image that holds them recovers every
// entry.
func TestPreallocateSegments(t *testing.T) {
	for _, ahead := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("ahead=%d", ahead), func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallConfig(dir)
			cfg.UseAllocator, cfg.PreallocateSegments = true, ahead
			s := mustOpen(t, vfs.OS(), cfg)
			var idx uint64
			for s.log.WriteOffset() < 3*cfg.CommitLogFileSize+1000 {
				idx++
				if _, err := s.AppendMessages(header(idx), []message.Message{testMessage("pre", 0, int(idx), nil)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			written := int(s.log.WriteOffset()/cfg.CommitLogFileSize) + 1
			deadline := time.Now().Add(10 * time.Second)
			for len(commitlogFiles(t, dir)) != written+ahead {
				if time.Now().After(deadline) {
					t.Fatalf("%d segment files with %d written and %d to prepare ahead", len(commitlogFiles(t, dir)), written, ahead)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			crash := t.TempDir()
			copyImage(t, dir, crash)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := len(commitlogFiles(t, dir)); got != written {
				t.Fatalf("after a clean close %d segment files, want the %d written", got, written)
			}
			for _, d := range []string{dir, crash} {
				cfg.Dir = d
				s := mustOpen(t, vfs.OS(), cfg)
				if got, _ := s.Applied(); got != idx {
					t.Fatalf("%s: applied %d after reopening, want %d", d, got, idx)
				}
				res, err := s.GetMessages("pre", 0, int64(idx-1), 1, 1<<20, "")
				if err != nil || len(res.Messages) != 1 || !bytes.HasPrefix(res.Messages[0].Body, []byte("msg-")) {
					t.Fatalf("%s: last message: %v %+v", d, err, res)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if err := verify.Stores(vfs.OS(), []string{dir, crash}, io.Discard); err != nil {
				t.Fatalf("verify: %v", err)
			}
		})
	}
}

// TestPreallocateSegmentsValidate: the setting's bounds, named in the error.
func TestPreallocateSegmentsValidate(t *testing.T) {
	for _, v := range []int{-1, MaxPreallocateSegments + 1} {
		c := DefaultConfig("d")
		c.PreallocateSegments = v
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "PreallocateSegments") {
			t.Fatalf("PreallocateSegments %d: %v", v, err)
		}
	}
	c := DefaultConfig("d")
	c.CommitLogFileSize = 1000
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "CommitLogFileSize = 1000") {
		t.Fatalf("CommitLogFileSize 1000: %v", err)
	}
	c = DefaultConfig("d")
	c.ConsumeQueueFileSize = 30
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ConsumeQueueFileSize = 30") {
		t.Fatalf("ConsumeQueueFileSize 30: %v", err)
	}
}
