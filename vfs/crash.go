package vfs

import (
	"bytes"
	"math/rand"
	"path/filepath"
	"sort"
)

// CrashMode says what a simulated power loss keeps of unsynced writes.
type CrashMode int

const (
	// DropUnsynced keeps only what was synced: every file has its content
	// as of its last Sync.
	DropUnsynced CrashMode = iota
	// KeepUnsynced keeps everything, like kill -9 with the page cache
	// surviving.
	KeepUnsynced
	// TearUnsynced keeps, per file, the synced content plus a random prefix
	// of the unsynced writes and truncations in the order they were made;
	// the last write of the prefix is cut at a random byte half of the time.
	// With CrashOptions.Reorder, each 4 KiB-aligned piece of every later
	// write is also applied with probability 1/2, in no particular order
	// (mmap write-back order is arbitrary). Later truncations are dropped.
	TearUnsynced
)

// TearPage is the granularity of out-of-order write-back under
// TearUnsynced with Reorder.
const TearPage = 4096

func (m CrashMode) String() string {
	switch m {
	case DropUnsynced:
		return "drop-unsynced"
	case KeepUnsynced:
		return "keep-unsynced"
	case TearUnsynced:
		return "tear-unsynced"
	}
	return "crash-mode(?)"
}

// CrashOptions configure CrashClone and CrashAt.
type CrashOptions struct {
	Mode CrashMode
	// Rand drives TearUnsynced; nil means a fixed seed (0), so the clone is
	// reproducible either way. It is only used under the file system's lock.
	Rand *rand.Rand
	// Reorder, under TearUnsynced, also applies random 4 KiB pieces of the
	// unsynced writes after the kept prefix.
	Reorder bool
	// Writeback also models the kernel's write-back of the dirty pages of
	// attached mappings (AttachMapping: bytes written into a shared mapping
	// and not yet msynced). Under KeepUnsynced every dirty page survives,
	// as after a kill -9 (the page cache outlives the process). Otherwise
	// each dirty page survives with probability 1/2, and one in four of
	// those is torn: only a random subset of its 512-byte sectors lands.
	Writeback bool
}

// Sector is the unit a page written back during a power loss can be torn
// at (CrashOptions.Writeback).
const Sector = 512

// CrashClone returns a new MemFS as a power loss would leave this one, per
// opts (see CrashMode). Under KeepUnsynced every directory entry is kept;
// otherwise only the entries made durable by SyncDir (or MkdirAll) of their
// directory, and below directories that are themselves durable. Hard links
// are kept; the clone has no crash armed, all of it durable, and an op count
// of 0. The receiver is unchanged.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cloneLocked(opts)
}

// CrashAt arms a crash: counting mutating operations from now (0 is the
// next one), when operation k is about to run the file system records
// CrashClone(opts) and that operation and every later one (reads included)
// fails with ErrCrashed. A negative k disarms.
func (m *MemFS) CrashAt(k int, opts CrashOptions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k < 0 {
		m.crashAt = -1
		return
	}
	m.crashAt = m.ops + k
	m.crashOpts = opts
}

// Crashed returns the clone recorded when an armed crash fired.
func (m *MemFS) Crashed() (*MemFS, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed, m.crashed != nil
}

// cloneLocked builds the crash clone; m.mu is held. Paths are visited in
// sorted order so a seeded Rand gives the same clone every time.
func (m *MemFS) cloneLocked(opts CrashOptions) *MemFS {
	r := opts.Rand
	if r == nil {
		r = rand.New(rand.NewSource(0))
	}
	c := NewMem()
	done := make(map[*memNode]*memNode)
	names := m.nodes
	if opts.Mode != KeepUnsynced {
		names = m.durableNamespace()
	}
	for _, p := range sortedKeys(names) {
		n := names[p]
		if cn, ok := done[n]; ok {
			c.nodes[p] = cn
			continue
		}
		cn := &memNode{dir: n.dir}
		if !n.dir {
			cn.data = n.crashContent(opts, r)
			cn.durable = append([]byte(nil), cn.data...)
		}
		done[n] = cn
		c.nodes[p] = cn
	}
	for _, p := range append([]string{"/", "."}, sortedKeys(c.nodes)...) {
		if c.isDir(p) {
			c.syncDirLocked(p)
		}
	}
	return c
}

// durableNamespace is every path reachable from the roots through durable
// directory entries; m.mu is held.
func (m *MemFS) durableNamespace() map[string]*memNode {
	out := map[string]*memNode{}
	onPath := map[*memNode]bool{} // durable entries of different times can loop
	var walk func(dir string, entries map[string]*memNode)
	walk = func(dir string, entries map[string]*memNode) {
		for name, n := range entries {
			if onPath[n] {
				continue
			}
			p := filepath.Join(dir, name)
			out[p] = n
			if n.dir {
				onPath[n] = true
				walk(p, n.entries)
				delete(onPath, n)
			}
		}
	}
	for root, entries := range m.rootEntries {
		walk(root, entries)
	}
	return out
}

func sortedKeys(m map[string]*memNode) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// crashContent is what survives of this file under opts.
func (n *memNode) crashContent(opts CrashOptions, r *rand.Rand) []byte {
	var b []byte
	switch opts.Mode {
	case KeepUnsynced:
		b = append([]byte(nil), n.data...)
	case TearUnsynced:
		b = n.torn(opts.Reorder, r)
	default:
		b = append([]byte(nil), n.durable...)
	}
	if opts.Writeback {
		b = n.writeBack(b, opts.Mode == KeepUnsynced, r)
	}
	return b
}

// writeBack applies the dirty pages of n's mappings to b, the content that
// survives otherwise: all of them (all), or each with probability 1/2,
// torn at Sector granularity one time in four. Pages beyond b's end (a
// size change that did not survive) are not written.
func (n *memNode) writeBack(b []byte, all bool, r *rand.Rand) []byte {
	views := make([][]byte, 0, len(n.mappings))
	for m := range n.mappings {
		views = append(views, m.view())
	}
	sort.Slice(views, func(i, j int) bool { return len(views[i]) < len(views[j]) }) // seeded runs repeat
	for _, view := range views {
		end := min(len(view), len(n.data), len(b))
		for off := 0; off < end; off += TearPage {
			pe := min(off+TearPage, end)
			if bytes.Equal(view[off:pe], n.data[off:pe]) {
				continue // clean: what the file holds
			}
			switch {
			case all:
				copy(b[off:pe], view[off:pe])
			case r.Intn(2) == 0:
			case r.Intn(4) != 0:
				copy(b[off:pe], view[off:pe])
			default:
				for so := off; so < pe; so += Sector {
					if r.Intn(2) == 0 {
						se := min(so+Sector, pe)
						copy(b[so:se], view[so:se])
					}
				}
			}
		}
	}
	return b
}

// torn applies a random prefix of the pending changes to the durable
// content (see TearUnsynced).
func (n *memNode) torn(reorder bool, r *rand.Rand) []byte {
	b := append([]byte(nil), n.durable...)
	k := r.Intn(len(n.pending) + 1)
	var rest []memWrite
	for i, w := range n.pending {
		switch {
		case i < k-1:
			b = w.apply(b)
		case i == k-1 && !w.trunc && r.Intn(2) == 0:
			cut := r.Intn(len(w.data) + 1)
			b = writeAt(b, w.data[:cut], w.off)
			rest = append(rest, memWrite{off: w.off + int64(cut), data: w.data[cut:]})
		case i == k-1:
			b = w.apply(b)
		case !w.trunc:
			rest = append(rest, w)
		}
	}
	if reorder {
		for _, w := range rest {
			b = w.applyPages(b, r)
		}
	}
	return b
}

func (w memWrite) apply(b []byte) []byte {
	if w.trunc {
		return resize(b, w.size)
	}
	return writeAt(b, w.data, w.off)
}

// applyPages applies each TearPage-aligned piece of w with probability 1/2.
func (w memWrite) applyPages(b []byte, r *rand.Rand) []byte {
	for off := w.off; off < w.off+int64(len(w.data)); {
		end := min((off/TearPage+1)*TearPage, w.off+int64(len(w.data)))
		if r.Intn(2) == 0 {
			b = writeAt(b, w.data[off-w.off:end-w.off], off)
		}
		off = end
	}
	return b
}
