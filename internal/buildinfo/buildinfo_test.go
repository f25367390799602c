package buildinfo

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	old := Commit
	t.Cleanup(func() { Commit = old })
	Commit = "0123456789abcdef0123"
	s := String("raftmq")
	if !strings.HasPrefix(s, "raftmq ") || !strings.Contains(s, "commit 0123456789ab") || strings.Contains(s, "0123456789abc,") {
		t.Fatalf("String = %q", s)
	}
	Commit = ""
	if s := String("raftmq"); !strings.Contains(s, "commit ") {
		t.Fatalf("String without commit = %q", s)
	}
}
