package lossyfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// The durable namespace is the backing directory itself: a directory's
// durable entries are the entries of its backing directory (dpath), a
// file's durable names are hard links to its home. A directory fsync makes
// the backing entries of that directory equal to its live entries. All of
// this runs under fs.mu.

// syncDir makes d's live entries durable. A directory with no durable name
// keeps its durable entries under MetaDir/dirs until a fsync of its parent
// gives it one (Options.LenientDirs: that name becomes durable now).
func (f *FS) syncDir(d *inode) error {
	if !f.ensureDurable(d) {
		return nil // removed: its entries are unreachable anyway
	}
	names, err := readNames(f.bpath(d.dpath))
	if err != nil {
		return err
	}
	for name := range d.children {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		if i > 0 && names[i-1] == name || d == f.root && name == MetaDir {
			continue
		}
		if err := f.syncEntry(d, name); err != nil {
			return err
		}
	}
	return nil
}

// ensureDurable gives a live directory a durable place for its entries: its
// durable name, else an orphan directory (LenientDirs: its name, made
// durable with its ancestors'). It reports false for a removed directory.
func (f *FS) ensureDurable(d *inode) bool {
	orphan := strings.HasPrefix(d.dpath, orphanDirs)
	switch {
	case d == f.root || d.dpath != "" && !orphan:
		return true
	case !d.isLive():
		return false
	case f.lenientDirs:
		return f.ensureDurable(d.parent) && f.syncEntry(d.parent, d.name) == nil
	case orphan:
		return true
	}
	rel := orphanDirs + strconv.FormatUint(d.id, 10)
	if err := os.Mkdir(f.bpath(rel), 0o755); err != nil {
		f.log.Error("orphan directory", "path", rel, "error", err)
		return false
	}
	d.dpath = rel
	f.dirByPath[rel] = d
	return true
}

const orphanDirs = MetaDir + "/dirs/"

// durableEntry returns what the backing entry rel is: exists, and the inode
// it belongs to (nil if unknown).
func (f *FS) durableEntry(rel string) (bool, *inode, error) {
	fi, err := os.Lstat(f.bpath(rel))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("lossyfs: %w", err)
	}
	if fi.IsDir() {
		return true, f.dirByPath[rel], nil
	}
	return true, f.byIno[fi.Sys().(*syscall.Stat_t).Ino], nil
}

// syncEntry makes d's durable entry name match its live one.
func (f *FS) syncEntry(d *inode, name string) error {
	live := d.children[name]
	rel := filepath.Join(d.dpath, name)
	exists, cur, err := f.durableEntry(rel)
	if err != nil {
		return err
	}
	if exists && cur != nil && cur == live {
		return nil
	}
	if exists {
		if err := f.removeDurable(rel, cur); err != nil {
			return err
		}
	}
	if live == nil {
		return nil
	}
	return f.addDurable(rel, live)
}

// removeDurable removes the backing entry rel (of inode cur, may be nil).
// A directory still live elsewhere moves to MetaDir/dirs to keep its
// durable entries for when it gets a durable name again.
func (f *FS) removeDurable(rel string, cur *inode) error {
	path := f.bpath(rel)
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	if !fi.IsDir() {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
		if cur != nil {
			return f.maybeReap(cur)
		}
		return nil
	}
	if cur != nil && cur.isLive() {
		return f.moveDurableDir(cur, orphanDirs+strconv.FormatUint(cur.id, 10))
	}
	return f.removeDurableTree(rel)
}

// removeDurableTree removes a durable directory nothing live names, first
// saving the subdirectories still live elsewhere.
func (f *FS) removeDurableTree(rel string) error {
	names, err := readNames(f.bpath(rel))
	if err != nil {
		return err
	}
	for _, name := range names {
		exists, cur, err := f.durableEntry(filepath.Join(rel, name))
		if err != nil {
			return err
		}
		if exists {
			if err := f.removeDurable(filepath.Join(rel, name), cur); err != nil {
				return err
			}
		}
	}
	if d := f.dirByPath[rel]; d != nil {
		delete(f.dirByPath, rel)
		d.dpath = ""
	}
	if err := os.Remove(f.bpath(rel)); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	return nil
}

// addDurable creates the backing entry rel for live.
func (f *FS) addDurable(rel string, live *inode) error {
	if !live.dir {
		if err := os.Link(f.homePath(live.id), f.bpath(rel)); err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
		return nil
	}
	if live.dpath != "" {
		// Its old durable entry goes with it: directories have one name.
		return f.moveDurableDir(live, rel)
	}
	if err := os.Mkdir(f.bpath(rel), os.FileMode(live.mode)|0o700); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	live.dpath = rel
	f.dirByPath[rel] = live
	return nil
}

// moveDurableDir renames d's backing directory to rel, rewriting the
// durable paths of everything under it.
func (f *FS) moveDurableDir(d *inode, rel string) error {
	old := d.dpath
	if err := os.Rename(f.bpath(old), f.bpath(rel)); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	moved := map[string]*inode{}
	for p, n := range f.dirByPath {
		if p == old || strings.HasPrefix(p, old+"/") {
			moved[rel+strings.TrimPrefix(p, old)] = n
			delete(f.dirByPath, p)
		}
	}
	for p, n := range moved {
		n.dpath = p
		f.dirByPath[p] = n
	}
	return nil
}

func (d *inode) isLive() bool {
	for ; d != nil; d = d.parent {
		if d == d.fs.root {
			return true
		}
	}
	return false
}

// maybeReap removes the home of a file that has neither live nor durable
// names: nothing can reach its content again. An open descriptor keeps
// serving the processes that still have it open.
func (f *FS) maybeReap(n *inode) error {
	if n.nlink > 0 || n.gone {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(f.homePath(n.id), &st); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	if st.Nlink > 1 {
		return nil // durable names remain
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.openHome(); err != nil {
		return err
	}
	if err := os.Remove(f.homePath(n.id)); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	n.gone = true
	delete(f.byIno, n.homeIno)
	return nil
}

// pendingDirents counts the entries whose live and durable states differ,
// over the live tree.
func (f *FS) pendingDirents() (int, error) {
	var count func(d *inode) (int, error)
	count = func(d *inode) (int, error) {
		total := 0
		if d.dpath == "" || strings.HasPrefix(d.dpath, orphanDirs) {
			total += len(d.children)
		} else {
			names, err := readNames(f.bpath(d.dpath))
			if err != nil {
				return 0, err
			}
			for _, name := range names {
				if d == f.root && name == MetaDir {
					continue
				}
				if _, ok := d.children[name]; !ok {
					total++
				}
			}
			for name, live := range d.children {
				_, cur, err := f.durableEntry(filepath.Join(d.dpath, name))
				if err != nil {
					return 0, err
				}
				if cur != live {
					total++
				}
			}
		}
		for _, c := range d.children {
			if c.dir {
				n, err := count(c)
				if err != nil {
					return 0, err
				}
				total += n
			}
		}
		return total, nil
	}
	return count(f.root)
}
