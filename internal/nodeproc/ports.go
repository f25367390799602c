package nodeproc

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct free TCP ports on host: it listens on port 0
// n times at once (so the ports differ), then closes the listeners. Another
// process may still take a port before the node binds it.
func FreePorts(host string, n int) ([]int, error) {
	lis := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range lis {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("nodeproc: free port on %s: %w", host, err)
		}
		lis = append(lis, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
