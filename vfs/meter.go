package vfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
)

// A Meter counts the bytes written to disk per class of file (the disk
// meter behind raftmq_disk_write_bytes_total{file}). What counts as written:
//
//   - WriteAt on a file of a Metered FS: the bytes the call wrote (what
//     write()/pwrite hands the kernel; the kernel writes back whole pages,
//     so a short write into a clean page costs a page on the device);
//   - mmap Flush (msync): the page-aligned cover of the flushed range,
//     because msync writes back whole dirty pages — flushing the same
//     partly filled tail page twice writes that page twice, and the meter
//     says so;
//
// (mmap's pre-touch only reads, so it dirties nothing to count)
// and not: fallocate, truncate, directory fsyncs and the file system's own
// journal. /proc/PID/io write_bytes (ProcessWriteBytes) is the kernel's
// count of the same thing for a whole process, pages dirtied; the two agree
// to within the journal-free metadata writes when all files are metered.
type Meter struct {
	classify func(name string) string
	classes  []string
	counts   []atomic.Int64
}

// NewMeter returns a meter with the given classes; classify maps a path to
// one of them (an unknown answer is counted under the last class).
func NewMeter(classify func(name string) string, classes ...string) *Meter {
	if len(classes) == 0 {
		classes = []string{"other"}
	}
	return &Meter{classify: classify, classes: classes, counts: make([]atomic.Int64, len(classes))}
}

// Classes lists the classes in the order NewMeter got them.
func (m *Meter) Classes() []string { return m.classes }

// Written is the bytes counted under class so far (0 for an unknown class).
func (m *Meter) Written(class string) int64 {
	if i := m.index(class); i >= 0 {
		return m.counts[i].Load()
	}
	return 0
}

func (m *Meter) index(class string) int {
	for i, c := range m.classes {
		if c == class {
			return i
		}
	}
	return -1
}

// counter is the counter the file name belongs to.
func (m *Meter) counter(name string) *atomic.Int64 {
	i := m.index(m.classify(name))
	if i < 0 {
		i = len(m.classes) - 1
	}
	return &m.counts[i]
}

// WriteAccounter is implemented by the files of a Metered FS. Package mmap
// reports through it the bytes an msync made the kernel write, which never pass through WriteAt.
type WriteAccounter interface {
	AccountWrite(n int64)
}

// Metered wraps fs so that every byte written through its files is counted
// by m under the class of the file's path. Fd, Sync and the rest pass
// through unchanged (mmap maps the real descriptor).
func Metered(fs FS, m *Meter) FS {
	return &meteredFS{FS: fs, m: m}
}

type meteredFS struct {
	FS
	m *Meter
}

func (f *meteredFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &meteredFile{File: file, n: f.m.counter(file.Name())}, nil
}

func (f *meteredFS) Create(name string) (File, error) { return f.wrap(f.FS.Create(name)) }
func (f *meteredFS) Open(name string) (File, error)   { return f.wrap(f.FS.Open(name)) }

type meteredFile struct {
	File
	n *atomic.Int64
}

func (f *meteredFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (f *meteredFile) AccountWrite(n int64) { f.n.Add(n) }

// ErrNoProcIO: /proc/PID/io is missing or has no write_bytes line (not
// Linux, or a kernel without task I/O accounting).
var ErrNoProcIO = errors.New("vfs: no write_bytes in /proc/PID/io")

// ProcessWriteBytes is write_bytes of /proc/PID/io (pid 0: this process):
// the bytes the process caused to be sent to storage, counted when a page
// cache page is dirtied (so a page rewritten before writeback counts once,
// one rewritten after a sync counts again), file-system journal excluded.
func ProcessWriteBytes(pid int) (int64, error) {
	path := "/proc/self/io"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/io"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoProcIO, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("write_bytes:")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: %s: %w", ErrNoProcIO, path, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrNoProcIO, path)
}
