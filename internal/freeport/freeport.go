// Package freeport hands out free TCP ports for test and benchmark nodes
// to bind, from below the kernel's ephemeral port range, so that a port
// stays free between a node's kill and its restart.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports returns n distinct free TCP ports on host, for nodes to bind.
// They come from below the kernel's ephemeral port range: a port from
// there (a listen on port 0) could be taken, between two starts of a node
// (a kill and a restart), by any process's outgoing connection, and the
// restart failed with "address already in use". Each listener stays open
// until all are chosen, so one port is never returned twice. Another
// process may still bind a port before the node does.
func Ports(host string, n int) ([]int, error) {
	lo, hi := portsBelowEphemeral()
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("freeport: no free port on %s in [%d, %d) after 1000 tries", host, lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		lis = append(lis, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// portsBelowEphemeral is a range of 10,000 ports that ends where the
// kernel's ephemeral range (ip_local_port_range) starts.
func portsBelowEphemeral() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11024 {
				hi = v
			}
		}
	}
	return hi - 10000, hi
}
