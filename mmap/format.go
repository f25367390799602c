package mmap

// On-disk facts of mapped files and queues (see doc.go for the argument).
const (
	// NameDigits is the width of a queue file name: the file's absolute
	// start offset in decimal, zero-padded ("00000000001073741824").
	NameDigits = 20

	// TouchPage is the stride of PreTouch: one byte is read every
	// TouchPage bytes of a freshly created file so each page is faulted in
	// before the hot path writes there.
	TouchPage = 4096

	// tmpSuffix marks a file still being created: Open creates
	// name+tmpSuffix, preallocates and syncs it, then renames it into place,
	// so a file under its final name always has its full, durable size.
	// OpenQueue deletes leftovers "<20 digits>.tmp".
	tmpSuffix = ".tmp"

	// maxFileSize bounds a mapping (1 TiB) so sizes always fit an int.
	maxFileSize = 1 << 40
)
