//go:build !linux

package cluster

import (
	"errors"
	"fmt"
	"net/netip"
)

// network stands in for the Linux one: Netns clusters are skipped
// elsewhere, so none is ever opened.
type network struct{ ipPath string }

var errNetnsUnsupported = errors.New("network namespaces are not available")

type netServer struct {
	ns   string
	addr netip.Addr
}

const (
	nsRPCPort  = 4650
	nsRaftPort = 4651
)

func openNetwork(string) (*network, error) {
	return nil, fmt.Errorf("%w: they are a Linux feature", errNetnsUnsupported)
}

func (*network) addServer(string, int) (netServer, error) { return netServer{}, errNetnsUnsupported }
func (*network) setCuts(_, _ cutSet) error                { return errNetnsUnsupported }
func (*network) close() error                             { return nil }
func (*network) bridgeName() string                       { return "" }
func (*network) prefix() netip.Prefix                     { return netip.Prefix{} }
