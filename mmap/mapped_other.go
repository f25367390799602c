//go:build !linux

package mmap

import "github.com/raftmq/raftmq/vfs"

// mmapSupported: elsewhere every file uses the heap twin.
const mmapSupported = false

func openMapped(f vfs.File, name string, size int64, opts Options) (File, error) {
	return openHeap(f, name, size)
}
