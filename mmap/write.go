package mmap

// WriteAt copies p into f at off, which must lie within the file.
//
// On the real mapping it writes through the file's descriptor (pwrite)
// into the page cache the mapping shows, so readers of Bytes() see the
// bytes once it returns, and Flush makes them durable as it does bytes
// stored through Bytes(). On the virtual machines measured that was about
// ten times cheaper than storing into fresh pages of the mapping: every
// first store into a page takes a page fault, and on a page already faulted
// in for reading a write-protect fault that cost more again
// (BenchmarkFaultIn). Nothing is counted here: the disk meter counts what
// Flush makes the kernel write, however the pages were dirtied.
//
// On the heap twin it copies into Bytes().
func WriteAt(f File, p []byte, off int64) error {
	if err := checkRange(f.Name(), off, off+int64(len(p)), f.Size()); err != nil {
		return err
	}
	if w, ok := f.(pwriter); ok {
		return w.pwrite(p, off)
	}
	copy(f.Bytes()[off:], p)
	return nil
}

// pwriter is a File backed by a real mapping.
type pwriter interface {
	pwrite(p []byte, off int64) error
}
