// Package mmap provides fixed-size memory-mapped files, queues of them named
// by start offset, and an allocator that prepares the next files in the
// background. commitlog, consumequeue and index store their bytes here.
//
// # Files
//
// Open maps a file of a fixed size, creating it if needed. Writers copy
// into Bytes() or write with WriteAt (pwrite on the real mapping: no page
// faults, for large sequential writes); Flush(from, to) makes a range
// durable; Zero clears a range durably. Two implementations sit behind the File interface:
//
//   - the real mapping (Linux): a MAP_SHARED read-write mmap of an OS file.
//     Flush is msync(MS_SYNC) of the page-aligned cover of the range,
//     which a range of more than 256 KiB first writes a chunk at a time
//     (sync_file_range, waited for), so one Flush never queues more than
//     that on the disk ahead of other syncs. Zero
//     is fallocate(ZERO_RANGE|KEEP_SIZE) — which keeps the blocks allocated
//     — falling back to PUNCH_HOLE|KEEP_SIZE, each followed by fdatasync,
//     and to memclr + msync where fallocate cannot zero. WillNeed/DontNeed
//     are madvise hints; Close munmaps and closes.
//   - the heap twin, used when the vfs file has no descriptor (vfs.MemFS)
//     or Options.Heap is set: the file is read into a []byte at open, Flush
//     writes [from, to) back with WriteAt and syncs, Zero clears and
//     flushes. On a MemFS, a crash clone with vfs.DropUnsynced therefore
//     holds exactly the flushed bytes.
//
// # Format
//
// A queue directory holds only files named by their absolute start offset
// in 20 zero-padded decimal digits (FileName, ParseFileName; anything else
// is ErrFileName). All files of a queue have the same size, start at a
// multiple of it and follow each other without gaps (ErrNotContiguous).
// Every file has its full size on disk from the moment its final name
// exists: Open creates "<name>.tmp", preallocates it with fallocate (so the
// blocks are reserved and read as zeros), fdatasyncs it, renames it into
// place and fsyncs the directory. A crash can leave only a ".tmp" leftover,
// which OpenQueue deletes. So bytes that were never written read as zeros.
//
// With PreTouch, one byte of a freshly created file is read every TouchPage
// (4 KiB) bytes right after mapping, so that the page-cache pages exist
// before the writer needs them and its first write into a page is a
// write-protect fault. Reading keeps the pages clean: written zeros made
// the kernel write a whole segment of zeros back to disk before the data
// went over it. Files that already existed are never touched. On Linux 6.x
// with ext4 that write-protect fault cost more than the whole fault on an
// untouched page (BenchmarkFirstWrite), so the store leaves PreTouch off
// by default.
//
// TruncateDirty(off) deletes files starting after off (newest first, so a
// crash leaves no hole) and durably zeroes the file holding off from off up
// to the old WriteOffset or the file end, whichever is smaller: after a
// truncation, the bytes past the end of the log are zeros again, as in a
// fresh file. (RocketMQ leaves them as they were.) DeleteOldest removes
// files from the front only, never the last one.
//
// # Queue and allocator
//
// A Queue keeps its segment list as an immutable snapshot swapped
// atomically and its watermarks (WriteOffset, FlushedOffset) in atomics, so
// readers never block the single writer. An Allocator runs one goroutine:
// Queue.Roll asks it for the next file and at the same time queues the one
// after, which is created, preallocated, mapped and optionally pre-touched
// while the writer fills the current one. Allocator.Close stops the
// goroutine, waits for it and deletes prepared files nobody took.
package mmap
