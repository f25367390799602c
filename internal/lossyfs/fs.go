package lossyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// MetaDir is the reserved name, at the root of the backing directory, of
// lossyfs's own bookkeeping (file homes and directories waiting for a
// durable name). It is not visible through the mount.
const MetaDir = ".lossyfs"

var (
	// ErrClosed is returned by PowerLoss and Unmount on a file system that
	// already lost power or was unmounted.
	ErrClosed = errors.New("lossyfs: file system is not mounted")
	// ErrNoAbort means the FUSE connection could not be aborted through
	// /sys/fs/fuse/connections, so the kernel's dirty pages would survive.
	ErrNoAbort = errors.New("lossyfs: cannot abort the FUSE connection")
	// ErrUnsupported is returned at mount for a backing entry that is
	// neither a regular file nor a directory.
	ErrUnsupported = errors.New("lossyfs: unsupported file type")
)

// Options configure a mount.
type Options struct {
	// EntryTimeout and AttrTimeout are the kernel's cache times for names
	// and attributes. Every change goes through the mount, so caching is
	// coherent within one mount; a power loss ends the mount (and its
	// caches). Zero means zero.
	EntryTimeout, AttrTimeout time.Duration
	// LenientDirs makes an fsync of a directory that has no durable name
	// yet also make its name (and its ancestors' names) durable, as ext4's
	// journal does in practice; by default (POSIX) the directory stays
	// unreachable until its parent is fsynced.
	LenientDirs bool
	// AllowOther lets users other than the mounting one use the mount.
	AllowOther bool
	// Debug logs every FUSE request.
	Debug bool
	// Logger gets mount, power-loss and error events (default: none).
	Logger hclog.Logger
}

// FS is one mount of a lossy file system.
type FS struct {
	backing, mountpoint string
	log                 hclog.Logger
	server              *fuse.Server
	conn                string      // /sys/fs/fuse/connections/N
	down                atomic.Bool // PowerLoss or Unmount began
	dead                atomic.Bool // requests fail with EIO
	lenientDirs         bool

	mu        sync.Mutex // namespace: children, parent, dpath, nlink, gone, byIno, dirByPath
	root      *inode
	nextID    uint64
	byIno     map[uint64]*inode // backing st_ino of a file's home -> file
	dirByPath map[string]*inode // durable backing path of a directory -> directory
}

// inode is one file or directory of the live namespace.
type inode struct {
	fs  *FS
	id  uint64
	dir bool

	// namespace, guarded by fs.mu
	parent   *inode            // directories: live parent (nil: removed, or root)
	name     string            // directories: live name
	children map[string]*inode // directories
	dpath    string            // directories: durable backing path ("" none)
	nlink    int               // files: live names
	gone     bool              // files: home removed (unreachable)
	homeIno  uint64            // files: st_ino of the home

	mu    sync.Mutex // attributes and file data
	mode  uint32     // permission bits
	uid   uint32
	gid   uint32
	mtime time.Time
	ctime time.Time
	f     file
}

func (f *FS) homePath(id uint64) string {
	return filepath.Join(f.backing, MetaDir, "inodes", strconv.FormatUint(id, 10))
}

func (f *FS) bpath(rel string) string { return filepath.Join(f.backing, rel) }

// Mount serves backing on mountpoint. The backing directory's content is
// the durable state; files and directories it holds are the file system's
// content after mount.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	mountpoint, err = filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	f := &FS{backing: backing, mountpoint: mountpoint, log: log.Named("lossyfs"),
		lenientDirs: opts.LenientDirs, byIno: map[uint64]*inode{}, dirByPath: map[string]*inode{}}
	if err := f.load(); err != nil {
		return nil, err
	}
	entry, attr, neg := opts.EntryTimeout, opts.AttrTimeout, opts.EntryTimeout
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:    opts.AllowOther,
			FsName:        "lossyfs:" + backing,
			Name:          "lossyfs",
			DisableXAttrs: true,
			Debug:         opts.Debug,
			DirectMount:   true,
			// MaxWrite large enough that a msync of many pages is few requests.
			MaxWrite: 1 << 20,
		},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		RootStableAttr:  &fs.StableAttr{Ino: f.root.id, Mode: fuse.S_IFDIR},
	}
	server, err := fs.Mount(mountpoint, &node{in: f.root}, fo)
	if err != nil {
		f.closeFiles()
		return nil, fmt.Errorf("lossyfs: mount %s: %w", mountpoint, err)
	}
	f.server = server
	conn, err := connectionDir(mountpoint)
	if err != nil {
		_ = server.Unmount()
		f.closeFiles()
		return nil, err
	}
	f.conn = conn
	f.log.Info("mounted", "backing", backing, "mountpoint", mountpoint, "connection", conn)
	return f, nil
}

// Backing and Mountpoint return the directories the FS was mounted with.
func (f *FS) Backing() string    { return f.backing }
func (f *FS) Mountpoint() string { return f.mountpoint }

// connectionDir finds the fusectl directory of the mount at mountpoint,
// mounting fusectl if needed.
func connectionDir(mountpoint string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return "", fmt.Errorf("lossyfs: stat mountpoint: %w", err)
	}
	// fusectl names a connection by the kernel's dev_t (major<<20 | minor).
	id := uint64(unix.Major(st.Dev))<<20 | uint64(unix.Minor(st.Dev))
	dir := filepath.Join("/sys/fs/fuse/connections", strconv.FormatUint(id, 10))
	if _, err := os.Stat(filepath.Join(dir, "abort")); err == nil {
		return dir, nil
	}
	if err := unix.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return "", fmt.Errorf("%w: mount fusectl: %w", ErrNoAbort, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "abort")); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoAbort, err)
	}
	return dir, nil
}

// load builds the live namespace from the backing directory: every file
// gets a home (its durable content under MetaDir/inodes, hard-linked to its
// names); homes no name reaches and directories that never got a durable
// name are what the last power loss left unreachable, and are removed.
func (f *FS) load() error {
	meta := filepath.Join(f.backing, MetaDir)
	if err := os.MkdirAll(filepath.Join(meta, "inodes"), 0o755); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(meta, "dirs")); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	if err := os.Mkdir(filepath.Join(meta, "dirs"), 0o755); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	homes, err := f.loadHomes()
	if err != nil {
		return err
	}
	f.nextID = 2
	for id := range homes {
		f.nextID = max(f.nextID, homes[id].id+1)
	}
	st, err := os.Stat(f.backing)
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	f.root = f.newDir(nil, "", st)
	f.root.id = 1
	f.root.dpath = "."
	f.dirByPath["."] = f.root
	if err := f.loadDir(f.root, homes); err != nil {
		return err
	}
	for ino, n := range homes {
		if f.byIno[ino] == nil {
			if err := os.Remove(f.homePath(n.id)); err != nil {
				return fmt.Errorf("lossyfs: remove unreachable home: %w", err)
			}
		}
	}
	return nil
}

func (f *FS) loadHomes() (map[uint64]*inode, error) {
	dir := filepath.Join(f.backing, MetaDir, "inodes")
	names, err := readNames(dir)
	if err != nil {
		return nil, err
	}
	homes := map[uint64]*inode{}
	for _, name := range names {
		id, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("lossyfs: stray file %s in %s", name, dir)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil {
			return nil, fmt.Errorf("lossyfs: %w", err)
		}
		homes[st.Ino] = &inode{fs: f, id: id, homeIno: st.Ino}
	}
	return homes, nil
}

func (f *FS) loadDir(d *inode, homes map[uint64]*inode) error {
	names, err := readNames(f.bpath(d.dpath))
	if err != nil {
		return err
	}
	for _, name := range names {
		if d == f.root && name == MetaDir {
			continue
		}
		rel := filepath.Join(d.dpath, name)
		fi, err := os.Lstat(f.bpath(rel))
		if err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
		switch {
		case fi.IsDir():
			c := f.newDir(d, name, fi)
			c.dpath = rel
			f.dirByPath[rel] = c
			d.children[name] = c
			if err := f.loadDir(c, homes); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			c, err := f.loadFile(rel, fi, homes)
			if err != nil {
				return err
			}
			c.nlink++
			d.children[name] = c
		default:
			return fmt.Errorf("%w: %s is %v", ErrUnsupported, rel, fi.Mode().Type())
		}
	}
	return nil
}

func (f *FS) loadFile(rel string, fi os.FileInfo, homes map[uint64]*inode) (*inode, error) {
	st := fi.Sys().(*syscall.Stat_t)
	if n := f.byIno[st.Ino]; n != nil {
		return n, nil // another name of a file already loaded
	}
	n := homes[st.Ino]
	if n == nil { // a file put into the backing directory by hand
		n = &inode{fs: f, id: f.nextID}
		f.nextID++
		if err := os.Link(f.bpath(rel), f.homePath(n.id)); err != nil {
			return nil, fmt.Errorf("lossyfs: %w", err)
		}
		n.homeIno = st.Ino
	}
	f.initFile(n, fi)
	n.f.size, n.f.durSize = fi.Size(), fi.Size()
	f.byIno[n.homeIno] = n
	return n, nil
}

func (f *FS) initFile(n *inode, fi os.FileInfo) {
	st := fi.Sys().(*syscall.Stat_t)
	n.fs = f
	n.mode = uint32(fi.Mode().Perm())
	n.uid, n.gid = st.Uid, st.Gid
	n.mtime, n.ctime = fi.ModTime(), fi.ModTime()
	n.f.visible = noMask
	n.f.pages = map[int64]*page{}
}

func (f *FS) newDir(parent *inode, name string, fi os.FileInfo) *inode {
	st := fi.Sys().(*syscall.Stat_t)
	d := &inode{fs: f, id: f.nextID, dir: true, parent: parent, name: name, children: map[string]*inode{},
		mode: uint32(fi.Mode().Perm()), uid: st.Uid, gid: st.Gid, mtime: fi.ModTime(), ctime: fi.ModTime()}
	f.nextID++
	return d
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// files returns every file inode with a home, by id.
func (f *FS) files() []*inode {
	out := make([]*inode, 0, len(f.byIno))
	for _, n := range f.byIno {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (f *FS) closeFiles() {
	for _, n := range f.files() {
		n.mu.Lock()
		if n.f.fd != nil {
			n.f.fd.Close()
			n.f.fd = nil
		}
		n.mu.Unlock()
	}
}

// Sync makes everything durable, like sync(2) on a disk: every file's data
// and every directory's entries.
func (f *FS) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down.Load() {
		return ErrClosed
	}
	return f.syncAllLocked()
}

func (f *FS) syncAllLocked() error {
	for _, n := range f.files() {
		n.mu.Lock()
		err := n.sync()
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	var walk func(d *inode) error
	walk = func(d *inode) error {
		if err := f.syncDir(d); err != nil {
			return err
		}
		for _, c := range sortedChildren(d) {
			if c.dir {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(f.root)
}

// Unmount is a clean shutdown: the kernel writes back its dirty pages, then
// everything is made durable and the mount goes away.
func (f *FS) Unmount() error {
	if f.down.Swap(true) {
		return ErrClosed
	}
	err := f.server.Unmount() // the kernel's write-back at unmount still lands
	f.server.Wait()
	f.dead.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	serr := f.syncAllLocked()
	f.closeFiles()
	f.log.Info("unmounted", "mountpoint", f.mountpoint)
	if err != nil {
		return fmt.Errorf("lossyfs: unmount %s: %w", f.mountpoint, err)
	}
	return serr
}

// abort cuts the FUSE connection: requests in flight fail, the kernel's
// dirty pages of this mount are discarded.
func (f *FS) abort() error {
	if err := os.WriteFile(filepath.Join(f.conn, "abort"), []byte("1"), 0o200); err != nil {
		return fmt.Errorf("%w: %w", ErrNoAbort, err)
	}
	return nil
}

// detach lazily unmounts the aborted mount and waits for the server loops.
func (f *FS) detach(ctx context.Context) error {
	if err := unix.Unmount(f.mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("lossyfs: detach %s: %w", f.mountpoint, err)
	}
	done := make(chan struct{})
	go func() {
		f.server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lossyfs: wait for server after abort: %w", ctx.Err())
	}
}

func sortedChildren(d *inode) []*inode {
	names := make([]string, 0, len(d.children))
	for name := range d.children {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*inode, len(names))
	for i, name := range names {
		out[i] = d.children[name]
	}
	return out
}
