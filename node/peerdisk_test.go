package node

import "testing"

// The leader's connections to its peers' APIs follow the member map: one
// to an address no member has any more is closed and forgotten.
func TestPeerDiskConnsFollowMembers(t *testing.T) {
	p := newPeerDisks()
	defer p.closeConns()
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		if _, err := p.conn(addr); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := p.conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	p.dropConnsExcept(map[string]string{"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"})
	if len(p.conns) != 2 || p.conns["127.0.0.1:3"] != nil {
		t.Fatalf("connections to %v after n3 left, want n1's and n2's", p.conns)
	}
	if again, _ := p.conn("127.0.0.1:1"); again != kept {
		t.Fatal("a live member's connection was replaced")
	}
}
