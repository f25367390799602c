package lossyfs

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// PowerLossOptions shape one power loss.
type PowerLossOptions struct {
	// Seed drives which unsynced sectors Torn persists.
	Seed int64
	// Torn persists a seeded random subset of the unsynced pages, as a disk
	// writing back its cache in any order would: each dirty page is dropped
	// with probability 1/2, persisted whole with 1/4, torn with 1/4 (each of
	// its written 512-byte sectors persisted with probability 1/2). Only
	// bytes within the file's durable size are persisted (a size change is
	// metadata, durable only by fsync). Directory changes are always dropped.
	Torn bool
	// NoWriteback skips the first step, pushing the kernel's dirty pages of
	// the mount into lossyfs (syncfs, which never reaches a FUSE server as a
	// sync); they are then discarded by the abort without being counted.
	NoWriteback bool
}

// Report says what a power loss dropped.
type Report struct {
	Seed             int64 `json:"seed"`
	Torn             bool  `json:"torn"`
	DroppedBytes     int64 `json:"dropped_bytes"`     // unsynced written bytes lost (in 512-byte sectors)
	DroppedPages     int   `json:"dropped_pages"`     // unsynced pages not persisted whole
	PersistedPages   int   `json:"persisted_pages"`   // unsynced pages persisted whole or torn
	TornPages        int   `json:"torn_pages"`        // of those, persisted in part
	PersistedSectors int   `json:"persisted_sectors"` // unsynced sectors persisted
	DroppedSizes     int   `json:"dropped_sizes"`     // files whose unsynced size change was lost
	DroppedDirents   int   `json:"dropped_dirents"`   // directory entries whose unsynced change was lost
	Files            int   `json:"files"`             // files that lost something
}

func (r Report) String() string {
	return fmt.Sprintf("dropped %d bytes in %d pages of %d files, %d sizes, %d dirents; persisted %d pages (%d torn, %d sectors); seed %d torn %v",
		r.DroppedBytes, r.DroppedPages, r.Files, r.DroppedSizes, r.DroppedDirents,
		r.PersistedPages, r.TornPages, r.PersistedSectors, r.Seed, r.Torn)
}

// PowerLoss cuts the power: the kernel's dirty pages are pushed into the
// volatile layer (unless NoWriteback), the FUSE connection is aborted (so
// nothing more arrives and the kernel's caches die), the volatile layer is
// dropped (Torn: partly persisted) and the mount is detached. The processes
// using the mount should have been killed first (SIGKILL); their open
// files fail from now on. The FS is dead afterwards: Mount the backing
// directory again to see what survived.
func (f *FS) PowerLoss(ctx context.Context, opts PowerLossOptions) (Report, error) {
	if f.down.Swap(true) {
		return Report{}, ErrClosed
	}
	wb := make(chan struct{})
	if opts.NoWriteback {
		close(wb)
	} else {
		go func() {
			defer close(wb)
			f.writeback()
		}()
	}
	select {
	case <-wb:
	case <-ctx.Done():
		f.log.Warn("write-back before power loss did not finish", "error", ctx.Err())
	}
	if err := f.abort(); err != nil {
		return Report{}, err
	}
	f.dead.Store(true)
	<-wb // the abort failed whatever it still waited for
	rep, err := f.dropVolatile(opts)
	if err != nil {
		return rep, err
	}
	if err := f.detach(ctx); err != nil {
		return rep, err
	}
	f.log.Info("power loss", "mountpoint", f.mountpoint, "report", rep.String())
	return rep, nil
}

// writeback makes the kernel send its dirty pages of the mount as WRITEs.
func (f *FS) writeback() {
	fd, err := unix.Open(f.mountpoint, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		f.log.Warn("write-back before power loss", "error", err)
		return
	}
	defer unix.Close(fd)
	start := time.Now()
	if err := unix.Syncfs(fd); err != nil {
		f.log.Warn("write-back before power loss", "error", err)
	}
	f.log.Debug("write-back before power loss", "took", time.Since(start))
}

func (f *FS) dropVolatile(opts PowerLossOptions) (Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.closeFiles()
	rep := Report{Seed: opts.Seed, Torn: opts.Torn}
	n, err := f.pendingDirents()
	if err != nil {
		return rep, err
	}
	rep.DroppedDirents = n
	rng := rand.New(rand.NewSource(opts.Seed))
	for _, in := range f.files() {
		in.mu.Lock()
		err := in.drop(opts.Torn, rng, &rep)
		in.mu.Unlock()
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// drop discards the file's unsynced state, persisting a random part of it
// when torn.
func (n *inode) drop(torn bool, rng *rand.Rand, rep *Report) error {
	lost := false
	if n.f.size != n.f.durSize || n.f.visible < n.f.durSize {
		rep.DroppedSizes++
		lost = true
	}
	idxs := make([]int64, 0, len(n.f.pages))
	for idx := range n.f.pages {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	for _, idx := range idxs {
		p := n.f.pages[idx]
		keep := uint8(0)
		if torn {
			switch rng.Intn(4) {
			case 2:
				keep = p.dirty
			case 3:
				keep = p.dirty & uint8(rng.Intn(256))
			}
		}
		kept, err := n.persistSectors(idx, p, keep)
		if err != nil {
			return err
		}
		dropped := bits.OnesCount8(p.dirty) - kept
		rep.DroppedBytes += int64(dropped) * SectorSize
		rep.PersistedSectors += kept
		if kept > 0 {
			rep.PersistedPages++
			if dropped > 0 {
				rep.TornPages++
			}
		}
		if dropped > 0 {
			rep.DroppedPages++
			lost = true
		}
	}
	if lost {
		rep.Files++
	}
	n.f.pages = map[int64]*page{}
	return nil
}

// persistSectors writes the sectors of keep that lie within the durable
// size to the home and returns how many it wrote.
func (n *inode) persistSectors(idx int64, p *page, keep uint8) (int, error) {
	if keep == 0 || n.gone {
		return 0, nil
	}
	if err := n.openHome(); err != nil {
		return 0, err
	}
	var zero [SectorSize]byte
	kept := 0
	for s := range int64(sectorsPerPage) {
		off := idx*PageSize + s*SectorSize
		if keep&(1<<s) == 0 || off >= n.f.durSize {
			continue
		}
		b := zero[:]
		if p.data != nil {
			b = p.data[s*SectorSize : (s+1)*SectorSize]
		}
		b = b[:min(int64(len(b)), n.f.durSize-off)]
		if _, err := n.f.fd.WriteAt(b, off); err != nil {
			return kept, fmt.Errorf("lossyfs: persist torn page of inode %d: %w", n.id, err)
		}
		kept++
	}
	return kept, nil
}

// MountAgain mounts the backing directory of a file system that lost power
// on the same mountpoint.
func (f *FS) MountAgain(opts Options) (*FS, error) {
	if !f.dead.Load() {
		return nil, fmt.Errorf("lossyfs: %s is still mounted", f.mountpoint)
	}
	return Mount(f.backing, f.mountpoint, opts)
}
