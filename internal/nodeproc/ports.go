package nodeproc

import "github.com/raftmq/raftmq/internal/freeport"

// FreePorts returns n distinct free TCP ports on host, from below the
// kernel's ephemeral range (freeport.Ports): a port from there is not taken
// by an outgoing connection between a node's kill and its restart.
func FreePorts(host string, n int) ([]int, error) { return freeport.Ports(host, n) }
