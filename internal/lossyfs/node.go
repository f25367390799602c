package lossyfs

import (
	"context"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is the go-fuse face of an inode. go-fuse keeps one node per inode
// number while the kernel knows it; the inode is the state.
type node struct {
	fs.Inode
	in *inode
}

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeReaddirer   = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeReader      = (*node)(nil)
	_ fs.NodeWriter      = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeAllocater   = (*node)(nil)
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeOnForgetter = (*node)(nil)
)

func (n *node) lfs() *FS { return n.in.fs }

// errno maps an internal error to EIO after logging it.
func (n *node) errno(op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	n.lfs().log.Error("request failed", "op", op, "inode", n.in.id, "error", err)
	return syscall.EIO
}

func (n *node) newChild(ctx context.Context, c *inode, out *fuse.EntryOut) *fs.Inode {
	c.fill(&out.Attr)
	mode := uint32(fuse.S_IFREG)
	if c.dir {
		mode = fuse.S_IFDIR
	}
	return n.NewInode(ctx, &node{in: c}, fs.StableAttr{Mode: mode, Ino: c.id})
}

// fill sets attributes; for a directory the caller holds fs.mu.
func (in *inode) fill(a *fuse.Attr) {
	if !in.dir {
		in.mu.Lock()
		defer in.mu.Unlock()
	}
	a.Ino = in.id
	a.Mode = in.mode
	a.Uid, a.Gid = in.uid, in.gid
	a.Blksize = PageSize
	a.SetTimes(nil, &in.mtime, &in.ctime)
	if in.dir {
		a.Mode |= fuse.S_IFDIR
		a.Nlink = 2
		for _, c := range in.children {
			if c.dir {
				a.Nlink++
			}
		}
		a.Size = PageSize
		return
	}
	a.Mode |= fuse.S_IFREG
	a.Nlink = uint32(in.nlink)
	a.Size = uint64(in.f.size)
	a.Blocks = (a.Size + 511) / 512
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return nil, syscall.EIO
	}
	c := n.in.children[name]
	if c == nil {
		return nil, syscall.ENOENT
	}
	return n.newChild(ctx, c, out), 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return nil, syscall.EIO
	}
	names := make([]string, 0, len(n.in.children))
	for name := range n.in.children {
		names = append(names, name)
	}
	sort.Strings(names)
	list := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		c := n.in.children[name]
		mode := uint32(fuse.S_IFREG)
		if c.dir {
			mode = fuse.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: name, Mode: mode, Ino: c.id})
	}
	return fs.NewListDirStream(list), 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f := n.lfs()
	if f.dead.Load() {
		return syscall.EIO
	}
	if n.in.dir {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	n.in.fill(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f := n.lfs()
	if f.dead.Load() {
		return syscall.EIO
	}
	if n.in.dir {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	err := func() error {
		if !n.in.dir {
			n.in.mu.Lock()
			defer n.in.mu.Unlock()
		}
		now := time.Now()
		if sz, ok := in.GetSize(); ok && !n.in.dir {
			if err := n.in.truncate(int64(sz)); err != nil {
				return err
			}
			n.in.mtime = now
		}
		if m, ok := in.GetMode(); ok {
			n.in.mode = m & 0o7777
		}
		if uid, ok := in.GetUID(); ok {
			n.in.uid = uid
		}
		if gid, ok := in.GetGID(); ok {
			n.in.gid = gid
		}
		if mt, ok := in.GetMTime(); ok {
			n.in.mtime = mt
		}
		n.in.ctime = now
		return nil
	}()
	if err != nil {
		return n.errno("setattr", err)
	}
	n.in.fill(&out.Attr)
	return 0
}

// Open returns no handle: reads and writes go to the node. Without
// FOPEN_KEEP_CACHE the kernel drops its cached pages of the file at open.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.lfs().dead.Load() {
		return nil, 0, syscall.EIO
	}
	if n.in.dir {
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 {
		n.in.mu.Lock()
		err := n.in.truncate(0)
		n.in.mtime = time.Now()
		n.in.mu.Unlock()
		if err != nil {
			return nil, 0, n.errno("open", err)
		}
	}
	return nil, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if errno := f.checkNew(n.in, name); errno != 0 {
		return nil, nil, 0, errno
	}
	c, err := f.newFile(mode, ctx)
	if err != nil {
		return nil, nil, 0, n.errno("create", err)
	}
	c.nlink = 1
	n.in.children[name] = c
	n.in.touch()
	return n.newChild(ctx, c, out), nil, 0, 0
}

// checkNew vets a new name in d.
func (f *FS) checkNew(d *inode, name string) syscall.Errno {
	switch {
	case f.dead.Load():
		return syscall.EIO
	case d == f.root && name == MetaDir:
		return syscall.EPERM
	case d.children[name] != nil:
		return syscall.EEXIST
	case !d.isLive():
		return syscall.ENOENT
	}
	return 0
}

func (d *inode) touch() {
	d.mtime = time.Now()
	d.ctime = d.mtime
}

// newFile creates a file with an empty home.
func (f *FS) newFile(mode uint32, ctx context.Context) (*inode, error) {
	c := &inode{fs: f, id: f.nextID}
	f.nextID++
	fd, err := openNew(f.homePath(c.id))
	if err != nil {
		return nil, err
	}
	fi, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	f.initFile(c, fi)
	c.mode = mode & 0o7777
	if caller, ok := fuse.FromContext(ctx); ok {
		c.uid, c.gid = caller.Uid, caller.Gid
	}
	c.f.fd = fd
	c.homeIno = fi.Sys().(*syscall.Stat_t).Ino
	f.byIno[c.homeIno] = c
	return c, nil
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if errno := f.checkNew(n.in, name); errno != 0 {
		return nil, errno
	}
	now := time.Now()
	c := &inode{fs: f, id: f.nextID, dir: true, parent: n.in, name: name, children: map[string]*inode{},
		mode: mode & 0o7777, mtime: now, ctime: now}
	f.nextID++
	if caller, ok := fuse.FromContext(ctx); ok {
		c.uid, c.gid = caller.Uid, caller.Gid
	}
	n.in.children[name] = c
	n.in.touch()
	return n.newChild(ctx, c, out), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return syscall.EIO
	}
	c := n.in.children[name]
	switch {
	case c == nil:
		return syscall.ENOENT
	case c.dir:
		return syscall.EISDIR
	}
	delete(n.in.children, name)
	n.in.touch()
	c.nlink--
	return n.errno("unlink", f.maybeReap(c))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return syscall.EIO
	}
	c := n.in.children[name]
	switch {
	case c == nil:
		return syscall.ENOENT
	case !c.dir:
		return syscall.ENOTDIR
	case len(c.children) > 0:
		return syscall.ENOTEMPTY
	}
	delete(n.in.children, name)
	n.in.touch()
	c.parent = nil
	return 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if errno := f.checkNew(n.in, name); errno != 0 {
		return nil, errno
	}
	t, ok := target.(*node)
	if !ok || t.in.fs != f {
		return nil, syscall.EXDEV
	}
	if t.in.dir {
		return nil, syscall.EPERM
	}
	if t.in.nlink == 0 {
		return nil, syscall.ENOENT
	}
	t.in.nlink++
	n.in.children[name] = t.in
	n.in.touch()
	return n.newChild(ctx, t.in, out), 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return syscall.EIO
	}
	np, ok := newParent.(*node)
	if !ok || np.in.fs != f {
		return syscall.EXDEV
	}
	if flags&^uint32(unix.RENAME_NOREPLACE) != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE, RENAME_WHITEOUT
	}
	src, dst := n.in.children[name], np.in.children[newName]
	switch {
	case src == nil:
		return syscall.ENOENT
	case np.in == f.root && newName == MetaDir:
		return syscall.EPERM
	case dst != nil && flags&unix.RENAME_NOREPLACE != 0:
		return syscall.EEXIST
	case src == dst:
		return 0
	}
	if src.dir {
		for d := np.in; d != nil; d = d.parent {
			if d == src {
				return syscall.EINVAL
			}
		}
	}
	if dst != nil {
		switch {
		case dst.dir && !src.dir:
			return syscall.EISDIR
		case !dst.dir && src.dir:
			return syscall.ENOTDIR
		case dst.dir && len(dst.children) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(n.in.children, name)
	np.in.children[newName] = src
	n.in.touch()
	np.in.touch()
	if src.dir {
		src.parent, src.name = np.in, newName
	}
	if dst == nil {
		return 0
	}
	if dst.dir {
		dst.parent = nil
		return 0
	}
	dst.nlink--
	return n.errno("rename", f.maybeReap(dst))
}

func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if n.lfs().dead.Load() {
		return nil, syscall.EIO
	}
	n.in.mu.Lock()
	defer n.in.mu.Unlock()
	got, err := n.in.readAt(dest, off)
	if err != nil {
		return nil, n.errno("read", err)
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if n.lfs().dead.Load() {
		return 0, syscall.EIO
	}
	n.in.mu.Lock()
	defer n.in.mu.Unlock()
	if err := n.in.writeAt(data, off, int64(len(data)), true); err != nil {
		return 0, n.errno("write", err)
	}
	n.in.mtime = time.Now()
	return uint32(len(data)), 0
}

// Fsync covers fsync, fdatasync and msync of a file, and fsync of a
// directory (FSYNCDIR).
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	f := n.lfs()
	if f.dead.Load() {
		return syscall.EIO
	}
	if n.in.dir {
		f.mu.Lock()
		defer f.mu.Unlock()
		return n.errno("fsyncdir", f.syncDir(n.in))
	}
	n.in.mu.Lock()
	defer n.in.mu.Unlock()
	return n.errno("fsync", n.in.sync())
}

// Allocate supports preallocation (a size change) and zeroing a range
// (PUNCH_HOLE, ZERO_RANGE), all volatile until fsync.
func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	if n.lfs().dead.Load() {
		return syscall.EIO
	}
	const zeroing = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_ZERO_RANGE
	if mode&^uint32(unix.FALLOC_FL_KEEP_SIZE|zeroing) != 0 {
		return syscall.EOPNOTSUPP
	}
	n.in.mu.Lock()
	defer n.in.mu.Unlock()
	start, end := int64(off), int64(off+size)
	if mode&zeroing != 0 {
		stop := end
		if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
			stop = min(end, n.in.f.size)
		}
		if start < stop {
			if err := n.in.writeAt(nil, start, stop-start, true); err != nil {
				return n.errno("fallocate", err)
			}
		}
	} else if mode&unix.FALLOC_FL_KEEP_SIZE == 0 && end > n.in.f.size {
		n.in.f.size = end
	}
	n.in.mtime = time.Now()
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.lfs().backing, &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// OnForget closes the descriptor of a file nothing can reach any more.
func (n *node) OnForget() {
	f := n.lfs()
	f.mu.Lock()
	defer f.mu.Unlock()
	n.in.mu.Lock()
	defer n.in.mu.Unlock()
	if n.in.gone && n.in.f.fd != nil {
		n.in.f.fd.Close()
		n.in.f.fd = nil
		n.in.f.pages = map[int64]*page{}
	}
}

func openNew(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}
