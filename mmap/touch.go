package mmap

// Touch faults in the pages of [from, to) of f, clamped to the file, without
// dirtying them: one madvise(MADV_POPULATE_READ) per 4 MiB where the kernel
// has it, else a read of one byte every TouchPage bytes, whose sum it
// returns (keep it, so that the reads stay).
//
// Why touch ahead of a writer: the first store into a page of a file mapped
// with readahead (not Options.Random) that is not in the page cache yet
// makes the kernel read the page in, and with it the whole read-around
// window — the device's read_ahead_kb, 8 MiB on the machine measured — which
// for a fresh, fallocated file means zero-filling 8 MiB of new page-cache
// pages before the store completes. A commitlog writer took that as a stall
// of about 19 ms every 8 MiB, on every node at the same entry. Touching the
// pages ahead of the writer from another goroutine moves that work off the
// write path; the writer's first store into a touched page is a
// write-protect fault. Reading rather than writing keeps the pages clean
// (no zeros written back to disk before the data). MADV_POPULATE_WRITE
// would spare the writer that fault too, but it dirties the pages ahead of
// the data.
//
// Touch may run while a writer stores into the same file (it reads, at
// most, a byte the writer is storing: the value read does not matter); it
// must not run after Close. It does nothing on the heap twin, whose bytes
// are ordinary memory with nothing to fault in (and where such a read
// would be a data race to the race detector).
func Touch(f File, from, to int64) uint64 {
	m, ok := f.(toucher)
	if !ok {
		return 0
	}
	return m.touch(from, to)
}

// toucher is a File backed by a real mapping.
type toucher interface{ touch(from, to int64) uint64 }

// touchPages reads one byte every TouchPage bytes of data.
func touchPages(data []byte) uint64 {
	var sum uint64
	for i := 0; i < len(data); i += TouchPage {
		sum += uint64(data[i])
	}
	return sum
}
