package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS, safe for concurrent use. Besides the current
// content of each file it keeps the durable content (as of the last Sync)
// and the writes and truncations made since, and for each directory its
// entries as of its last SyncDir, so CrashClone can build the state a power
// loss would leave. As on a POSIX file system, Create, Remove, RemoveAll,
// Rename and Link change a directory durably only once SyncDir of that
// directory follows; MkdirAll is durable when it returns (as OS's, which
// fsyncs the parents). The roots "/" and "." always exist.
type MemFS struct {
	mu    sync.Mutex
	nodes map[string]*memNode // cleaned path → file or directory
	// rootEntries are the durable entries of the roots "/" and ".".
	rootEntries map[string]map[string]*memNode

	ops       int // mutating operations run so far
	crashAt   int // absolute op number that crashes; -1 when unarmed
	crashOpts CrashOptions
	crashed   *MemFS

	capacity int64 // bytes Space reports as the total; 0: unknown
}

// memNode is a file or a directory; hard links share one node.
type memNode struct {
	dir     bool
	entries map[string]*memNode // a directory's entries as of its last SyncDir
	data    []byte              // current content
	durable []byte              // content as of the last Sync
	pending []memWrite          // unsynced writes and truncations, oldest first
	// mappings are the views of processes' shared mappings of the file
	// (AttachMapping): their pages that differ from data are dirty there.
	mappings map[*mapping]struct{}
}

// mapping is one attached view; a pointer so each attach is its own key.
type mapping struct{ view func() []byte }

// memWrite is one unsynced change: a write of data at off, or (trunc) a
// change of the size to size.
type memWrite struct {
	trunc bool
	off   int64
	data  []byte
	size  int64
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS {
	return &MemFS{nodes: make(map[string]*memNode), crashAt: -1,
		rootEntries: map[string]map[string]*memNode{"/": {}, ".": {}}}
}

// SetCapacity makes Space report a file system of n bytes (0: unknown,
// the default), of which the files' current contents use their size. Writes
// are not refused past it: it is what the store's disk-usage rules read.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = n
}

// Space reports the capacity set by SetCapacity, less the bytes the files
// hold (a hard-linked file counts once); ErrNoSpaceInfo without one.
func (m *MemFS) Space(string) (Space, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity <= 0 {
		return Space{}, ErrNoSpaceInfo
	}
	seen := make(map[*memNode]bool)
	var used uint64
	for _, n := range m.nodes {
		if !n.dir && !seen[n] {
			seen[n] = true
			used += uint64(len(n.data))
		}
	}
	total := uint64(m.capacity)
	free := total - min(used, total)
	return Space{Total: total, Free: free, Avail: free}, nil
}

// OpCount is the number of mutating operations run so far (WriteAt,
// Truncate, Sync, Preallocate, Create, Remove, RemoveAll, Rename, Link,
// MkdirAll, SyncDir).
func (m *MemFS) OpCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// begin gates every operation; m.mu is held. Mutating operations are
// counted, and the armed one records the crash clone instead of running.
func (m *MemFS) begin(mutating bool) error {
	if m.crashed != nil {
		return ErrCrashed
	}
	if !mutating {
		return nil
	}
	if m.crashAt >= 0 && m.ops == m.crashAt {
		m.crashed = m.cloneLocked(m.crashOpts)
		return ErrCrashed
	}
	m.ops++
	return nil
}

func isRoot(p string) bool { return p == "." || filepath.Dir(p) == p }

func (m *MemFS) isDir(p string) bool {
	if isRoot(p) {
		return true
	}
	n := m.nodes[p]
	return n != nil && n.dir
}

func pathErr(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// Create implements FS. Truncating an existing file is durable at once.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return nil, pathErr("create", name, err)
	}
	p := filepath.Clean(name)
	if !m.isDir(filepath.Dir(p)) {
		return nil, pathErr("create", name, fs.ErrNotExist)
	}
	n := m.nodes[p]
	switch {
	case isRoot(p) || (n != nil && n.dir):
		return nil, pathErr("create", name, syscall.EISDIR)
	case n == nil:
		n = &memNode{}
		m.nodes[p] = n
	default:
		n.data, n.durable, n.pending = nil, nil, nil
	}
	return &memFile{fs: m, name: name, node: n}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(false); err != nil {
		return nil, pathErr("open", name, err)
	}
	n := m.nodes[filepath.Clean(name)]
	if n == nil {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &memFile{fs: m, name: name, node: n}, nil
}

// children lists the direct entries of dir, sorted; m.mu is held.
func (m *MemFS) children(dir string) []string {
	var names []string
	for k := range m.nodes {
		if k != dir && filepath.Dir(k) == dir {
			names = append(names, filepath.Base(k))
		}
	}
	sort.Strings(names)
	return names
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return pathErr("remove", name, err)
	}
	p := filepath.Clean(name)
	n := m.nodes[p]
	if n == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(m.children(p)) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(m.nodes, p)
	return nil
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return pathErr("removeall", name, err)
	}
	p := filepath.Clean(name)
	for k := range m.nodes {
		if under(k, p) {
			delete(m.nodes, k)
		}
	}
	return nil
}

// under reports whether k is p or below p.
func under(k, p string) bool {
	if k == p {
		return true
	}
	if isRoot(p) {
		return p == "." || strings.HasPrefix(k, p)
	}
	return strings.HasPrefix(k, p+string(filepath.Separator))
}

// Rename implements FS; directories move with everything below them.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if err := m.renameLocked(filepath.Clean(oldname), filepath.Clean(newname)); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

func (m *MemFS) renameLocked(op, np string) error {
	n := m.nodes[op]
	if n == nil {
		return fs.ErrNotExist
	}
	if !m.isDir(filepath.Dir(np)) {
		return fs.ErrNotExist
	}
	if op == np {
		return nil
	}
	if t := m.nodes[np]; t != nil {
		if t.dir != n.dir {
			return syscall.EISDIR
		}
		if t.dir && len(m.children(np)) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	if n.dir && under(np, op) {
		return syscall.EINVAL
	}
	moved := make(map[string]*memNode)
	for k, v := range m.nodes {
		if under(k, op) {
			moved[np+strings.TrimPrefix(k, op)] = v
			delete(m.nodes, k)
		}
	}
	for k, v := range moved {
		m.nodes[k] = v
	}
	return nil
}

// Link implements FS.
func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	n := m.nodes[filepath.Clean(oldname)]
	np := filepath.Clean(newname)
	var err error
	switch {
	case n == nil || !m.isDir(filepath.Dir(np)):
		err = fs.ErrNotExist
	case n.dir:
		err = syscall.EPERM
	case m.nodes[np] != nil || isRoot(np):
		err = fs.ErrExist
	default:
		m.nodes[np] = n
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return pathErr("mkdir", dir, err)
	}
	var todo []string
	for p := filepath.Clean(dir); !isRoot(p); p = filepath.Dir(p) {
		if n := m.nodes[p]; n != nil {
			if !n.dir {
				return pathErr("mkdir", p, syscall.ENOTDIR)
			}
			break
		}
		todo = append(todo, p)
	}
	for i := len(todo) - 1; i >= 0; i-- { // parents first
		p := todo[i]
		n := &memNode{dir: true, entries: map[string]*memNode{}}
		m.nodes[p] = n
		m.durableEntries(filepath.Dir(p))[filepath.Base(p)] = n
	}
	return nil
}

// durableEntries is the durable entry map of directory dir; m.mu is held.
func (m *MemFS) durableEntries(dir string) map[string]*memNode {
	if isRoot(dir) {
		return m.rootEntries[dir]
	}
	n := m.nodes[dir]
	if n.entries == nil {
		n.entries = map[string]*memNode{}
	}
	return n.entries
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(false); err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	p := filepath.Clean(dir)
	if !m.isDir(p) {
		if m.nodes[p] != nil {
			return nil, pathErr("readdir", dir, syscall.ENOTDIR)
		}
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	return m.children(p), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(false); err != nil {
		return nil, pathErr("stat", name, err)
	}
	p := filepath.Clean(name)
	if isRoot(p) {
		return memInfo{name: p, dir: true}, nil
	}
	n := m.nodes[p]
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return memInfo{name: filepath.Base(p), dir: n.dir, size: int64(len(n.data))}, nil
}

// SyncDir implements FS: dir's entries as they are now become durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(true); err != nil {
		return pathErr("syncdir", dir, err)
	}
	p := filepath.Clean(dir)
	if !m.isDir(p) {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	m.syncDirLocked(p)
	return nil
}

// syncDirLocked makes dir's current entries durable; m.mu is held.
func (m *MemFS) syncDirLocked(dir string) {
	entries := map[string]*memNode{}
	for _, name := range m.children(dir) {
		entries[name] = m.nodes[filepath.Join(dir, name)]
	}
	if isRoot(dir) {
		m.rootEntries[dir] = entries
		return
	}
	m.nodes[dir].entries = entries
}

// fileNode returns the file node at name; m.mu is held.
func (m *MemFS) fileNode(name string) (*memNode, error) {
	n := m.nodes[filepath.Clean(name)]
	if n == nil {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return n, nil
}

// ReadFile returns a copy of the current content of name (a test helper:
// it is not counted and works after a crash).
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.fileNode(name)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), n.data...), nil
}

// FlipBit flips one bit of name, in both the current and the durable
// content (a corruption-test helper; not counted).
func (m *MemFS) FlipBit(name string, byteOff int64, bit uint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.fileNode(name)
	if err != nil {
		return err
	}
	if byteOff < 0 || byteOff >= int64(len(n.data)) || bit > 7 {
		return pathErr("flipbit", name, fmt.Errorf("bit %d of byte %d outside %d bytes: %w", bit, byteOff, len(n.data), syscall.EINVAL))
	}
	n.data[byteOff] ^= 1 << bit
	if byteOff < int64(len(n.durable)) {
		n.durable[byteOff] ^= 1 << bit
	}
	return nil
}

// TruncateFile durably changes the size of name: both the current and the
// durable content are cut or zero-extended (a test helper; not counted).
// Unsynced writes stay pending.
func (m *MemFS) TruncateFile(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.fileNode(name)
	if err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", name, syscall.EINVAL)
	}
	n.data = resize(n.data, size)
	n.durable = resize(n.durable, size)
	return nil
}

// resize returns b cut or zero-extended to size, reusing b when it can.
func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	if size <= int64(cap(b)) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	nb := make([]byte, size, size+size/4)
	copy(nb, b)
	return nb
}

// writeAt writes p at off into b, growing it as needed.
func writeAt(b []byte, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

type memInfo struct {
	name string
	dir  bool
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// memFile is an open MemFS file; its state is guarded by fs.mu.
type memFile struct {
	fs     *MemFS
	name   string
	node   *memNode
	closed bool
}

var _ io.ReaderAt = (*memFile)(nil)

// gate locks the fs and checks the file is usable; on error the lock is
// already released.
func (f *memFile) gate(op string, mutating bool) error {
	f.fs.mu.Lock()
	if err := f.fs.begin(mutating); err != nil {
		f.fs.mu.Unlock()
		return pathErr(op, f.name, err)
	}
	if f.closed {
		f.fs.mu.Unlock()
		return pathErr(op, f.name, fs.ErrClosed)
	}
	return nil
}

func (f *memFile) Name() string { return f.name }
func (f *memFile) Fd() uintptr  { return NoFd }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.gate("read", false); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.gate("write", true); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.node.data = writeAt(f.node.data, p, off)
	f.node.pending = append(f.node.pending, memWrite{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.gate("truncate", true); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.node.truncate(size)
	return nil
}

func (n *memNode) truncate(size int64) {
	n.data = resize(n.data, size)
	n.pending = append(n.pending, memWrite{trunc: true, size: size})
}

func (f *memFile) Sync() error {
	if err := f.gate("sync", true); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.node.durable = append(f.node.durable[:0], f.node.data...)
	f.node.pending = nil
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.gate("stat", false); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}

// AttachMapping tells the file system that view returns the bytes of a
// shared mapping of this file (mmap's heap twin): the pages where they
// differ from what was written through the file are dirty in the mapping,
// not yet msynced. A crash with CrashOptions.Writeback may write any of
// those pages back, as a kernel writes dirty pages whenever it likes. view
// is called under the file system's lock, from inside a crash. The
// returned func detaches the view (the mapping is closed).
func (f *memFile) AttachMapping(view func() []byte) (detach func()) {
	m := &mapping{view: view}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.node.mappings == nil {
		f.node.mappings = map[*mapping]struct{}{}
	}
	f.node.mappings[m] = struct{}{}
	node := f.node
	return func() {
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		delete(node.mappings, m)
	}
}

// Preallocate extends the file with zeros to offset+length (an unsynced
// size change, like fallocate without KEEP_SIZE).
func (f *memFile) Preallocate(offset, length int64) error {
	if err := f.gate("fallocate", true); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	if offset < 0 || length < 0 {
		return pathErr("fallocate", f.name, syscall.EINVAL)
	}
	if end := offset + length; end > int64(len(f.node.data)) {
		f.node.truncate(end)
	}
	return nil
}

// Close releases the handle. After a crash it still releases it but
// returns ErrCrashed.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	if f.fs.crashed != nil {
		return pathErr("close", f.name, ErrCrashed)
	}
	return nil
}
