package lossyfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

const (
	// PageSize is the unit of the volatile layer: one dirty page of a file.
	PageSize = 4096
	// SectorSize is the unit a torn page is persisted in.
	SectorSize = 512

	sectorsPerPage = PageSize / SectorSize
	noMask         = int64(math.MaxInt64)
)

// page is one unsynced page of a file: its whole live content (nil: all
// zeros) and which of its sectors were written since the last sync.
type page struct {
	data  *[PageSize]byte
	dirty uint8
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// file is the data state of a regular file: the durable content is its home
// file in the backing directory (size durSize), the live content is the home
// masked from visible on (a truncation not yet synced) with pages on top.
// Guarded by inode.mu.
type file struct {
	fd      *os.File
	size    int64 // live size
	durSize int64 // size of the home file
	visible int64 // home bytes at or past visible read as zeros (noMask: none)
	pages   map[int64]*page
}

func (n *inode) openHome() error {
	if n.f.fd != nil {
		return nil
	}
	fd, err := os.OpenFile(n.fs.homePath(n.id), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("lossyfs: open home of inode %d: %w", n.id, err)
	}
	n.f.fd = fd
	return nil
}

// readHome fills dst with the durable bytes at off as the live view sees
// them (masked past visible, zeros past the home's end).
func (n *inode) readHome(dst []byte, off int64) error {
	clear(dst)
	lim := min(n.f.visible, n.f.durSize)
	if off >= lim {
		return nil
	}
	if err := n.openHome(); err != nil {
		return err
	}
	want := dst[:min(int64(len(dst)), lim-off)]
	if _, err := n.f.fd.ReadAt(want, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("lossyfs: read home of inode %d: %w", n.id, err)
	}
	return nil
}

// readPage copies the live content of page idx into dst (PageSize bytes).
func (n *inode) readPage(idx int64, dst []byte) error {
	if p, ok := n.f.pages[idx]; ok {
		if p.data == nil {
			clear(dst)
		} else {
			copy(dst, p.data[:])
		}
		return nil
	}
	return n.readHome(dst, idx*PageSize)
}

// readAt reads the live content; it returns fewer bytes only at the end of
// the file.
func (n *inode) readAt(dst []byte, off int64) (int, error) {
	if off >= n.f.size {
		return 0, nil
	}
	dst = dst[:min(int64(len(dst)), n.f.size-off)]
	if len(n.f.pages) == 0 {
		return len(dst), n.readHome(dst, off)
	}
	var buf [PageSize]byte
	for done := 0; done < len(dst); {
		pos := off + int64(done)
		idx, in := pos/PageSize, pos%PageSize
		if err := n.readPage(idx, buf[:]); err != nil {
			return 0, err
		}
		done += copy(dst[done:], buf[in:])
	}
	return len(dst), nil
}

// pageForWrite returns page idx of the overlay, materialised from the live
// view.
func (n *inode) pageForWrite(idx int64) (*page, error) {
	p, ok := n.f.pages[idx]
	if ok {
		return p, nil
	}
	p = &page{}
	var buf [PageSize]byte
	if err := n.readPage(idx, buf[:]); err != nil {
		return nil, err
	}
	if !isZero(buf[:]) {
		p.data = &buf
	}
	n.f.pages[idx] = p
	return p, nil
}

// writeAt puts data at off into the overlay (zeros when data is nil) and
// grows the live size to cover it when grow is set. Only sectors whose
// content changes count as written.
func (n *inode) writeAt(data []byte, off, length int64, grow bool) error {
	for pos := off; pos < off+length; {
		idx, in := pos/PageSize, pos%PageSize
		end := min(PageSize, in+(off+length-pos))
		p, err := n.pageForWrite(idx)
		if err != nil {
			return err
		}
		var chunk []byte
		if data != nil {
			chunk = data[pos-off : pos-off+(end-in)]
		}
		p.dirty |= p.update(chunk, in, end)
		pos += end - in
	}
	if grow && off+length > n.f.size {
		n.f.size = off + length
	}
	return nil
}

// update puts chunk (nil: zeros) at [in, end) of the page and returns the
// mask of the sectors it changed.
func (p *page) update(chunk []byte, in, end int64) uint8 {
	var changed uint8
	for s := in / SectorSize; s*SectorSize < end; s++ {
		from, to := max(in, s*SectorSize), min(end, (s+1)*SectorSize)
		var src []byte
		if chunk != nil {
			src = chunk[from-in : to-in]
		}
		switch {
		case p.data == nil && (src == nil || isZero(src)):
			continue
		case p.data == nil:
			p.data = new([PageSize]byte)
		}
		dst := p.data[from:to]
		if src == nil {
			if !isZero(dst) {
				clear(dst)
				changed |= 1 << s
			}
		} else if !bytes.Equal(dst, src) {
			copy(dst, src)
			changed |= 1 << s
		}
	}
	if p.data != nil && isZero(p.data[:]) {
		p.data = nil
	}
	return changed
}

// truncate sets the live size; bytes cut off read as zeros if the file grows
// again.
func (n *inode) truncate(size int64) error {
	if size < n.f.size {
		first := (size + PageSize - 1) / PageSize
		for idx := range n.f.pages {
			if idx >= first {
				delete(n.f.pages, idx)
			}
		}
		if in := size % PageSize; in != 0 {
			if err := n.writeAt(nil, size, PageSize-in, false); err != nil {
				return err
			}
		}
		n.f.visible = min(n.f.visible, size)
	}
	n.f.size = size
	return nil
}

// sync makes the live content durable: the home gets the live size and
// every overlay page. The backing file system is not fsynced: it is the
// durable state by definition (the host does not lose power).
func (n *inode) sync() error {
	if n.gone {
		return nil // unreachable: nothing to make durable
	}
	if err := n.openHome(); err != nil {
		return err
	}
	fd := int(n.f.fd.Fd())
	oldDur := min(n.f.durSize, n.f.visible)
	if n.f.visible < n.f.durSize {
		if err := unix.Ftruncate(fd, n.f.visible); err != nil {
			return fmt.Errorf("lossyfs: truncate home of inode %d: %w", n.id, err)
		}
	}
	if n.f.durSize != n.f.size || n.f.visible < n.f.durSize {
		if err := unix.Ftruncate(fd, n.f.size); err != nil {
			return fmt.Errorf("lossyfs: size home of inode %d: %w", n.id, err)
		}
	}
	n.f.durSize, n.f.visible = n.f.size, noMask
	if err := n.writePages(fd, oldDur); err != nil {
		return err
	}
	n.f.pages = map[int64]*page{}
	return nil
}

// writePages writes every overlay page to the home in runs; zero pages
// below oldDur become holes, zero pages past it already read as zeros.
func (n *inode) writePages(fd int, oldDur int64) error {
	idxs := make([]int64, 0, len(n.f.pages))
	for idx := range n.f.pages {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	for i := 0; i < len(idxs); {
		zero := n.f.pages[idxs[i]].data == nil
		j := i + 1
		for j < len(idxs) && idxs[j] == idxs[j-1]+1 && (n.f.pages[idxs[j]].data == nil) == zero && j-i < 256 {
			j++
		}
		from, to := idxs[i]*PageSize, min((idxs[j-1]+1)*PageSize, n.f.size)
		var err error
		if zero {
			err = n.zeroHome(fd, from, min(to, oldDur))
		} else {
			bufs := make([][]byte, 0, j-i)
			for _, idx := range idxs[i:j] {
				bufs = append(bufs, n.f.pages[idx].data[:])
			}
			err = pwriteAll(fd, bufs, from, to)
		}
		if err != nil {
			return fmt.Errorf("lossyfs: write home of inode %d: %w", n.id, err)
		}
		i = j
	}
	return nil
}

func (n *inode) zeroHome(fd int, from, to int64) error {
	if from >= to {
		return nil
	}
	err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return pwriteAll(fd, [][]byte{make([]byte, to-from)}, from, to)
	}
	return err
}

// pwriteAll writes the concatenation of bufs at from, cut at to.
func pwriteAll(fd int, bufs [][]byte, from, to int64) error {
	for _, b := range bufs {
		if from >= to {
			return nil
		}
		b = b[:min(int64(len(b)), to-from)]
		for len(b) > 0 {
			w, err := unix.Pwrite(fd, b, from)
			if err != nil {
				if err == unix.EINTR {
					continue
				}
				return err
			}
			b, from = b[w:], from+int64(w)
		}
	}
	return nil
}
