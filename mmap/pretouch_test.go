//go:build linux

package mmap

import "testing"

// preTouch stops at the next chunk once abort is closed, so an allocator's
// Close never waits for a whole segment to be faulted in.
func TestPreTouchStopsOnAbort(t *testing.T) {
	data := make([]byte, 3*touchChunk)
	for i := range data {
		data[i] = 1
	}
	abort := make(chan struct{})
	preTouch(data[:touchChunk], abort)
	for i := 0; i < touchChunk; i += TouchPage {
		if data[i] != 0 {
			t.Fatalf("byte %d not touched with abort open", i)
		}
	}
	close(abort)
	preTouch(data[touchChunk:], abort)
	for i := touchChunk; i < len(data); i += TouchPage {
		if data[i] != 1 {
			t.Fatalf("byte %d touched after abort", i)
		}
	}
}
