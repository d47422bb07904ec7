package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are chosen below the kernel's ephemeral range, so that no outgoing
// connection of any process can be holding a server's port as its local end
// when the server is restarted on it.
const (
	portFloor = 20000
	// portCeiling is used when the ephemeral range cannot be read.
	portCeiling = 32768
)

var (
	portsMu sync.Mutex
	// handedOut holds every port given to a server by this test binary, so
	// that two clusters of one binary never share one.
	handedOut = map[int]bool{}
)

// allocPorts returns n distinct loopback ports that were free when chosen.
func allocPorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	ceiling := ephemeralLow()
	if ceiling-portFloor < 1000 {
		return allocKernelPorts(n)
	}
	var (
		ports     []int
		listeners []net.Listener
	)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no free loopback port in [%d, %d) after %d tries", portFloor, ceiling, tries)
		}
		p := portFloor + rand.IntN(ceiling-portFloor)
		if handedOut[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		handedOut[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// allocKernelPorts lets the kernel pick the ports, holding each open until
// all are chosen so that they are distinct.
func allocKernelPorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		p := l.Addr().(*net.TCPAddr).Port
		if handedOut[p] {
			continue
		}
		handedOut[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow returns the lowest port of the kernel's ephemeral range.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return portCeiling
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return portCeiling
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return portCeiling
	}
	return lo
}
