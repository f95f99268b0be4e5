package libchain

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// TestNetNSHoldsRealKernel: in a namespace of its own with eth0 holding
// 10.9.9.9/24, NetNSHolds finds that address on eth0, not another one,
// not on another interface name; the caller's namespace is untouched.
func TestNetNSHoldsRealKernel(t *testing.T) {
	privateNetNS(t, func(path string) error {
		link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "peer0"}
		if err := netlink.LinkAdd(link); err != nil {
			return err
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 9, 9, 9), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		for _, tc := range []struct {
			ifname string
			ips    map[string]bool
			want   bool
		}{
			{"eth0", map[string]bool{"10.9.9.9": true}, true},
			{"eth0", map[string]bool{"10.9.9.8": true, "10.9.9.9": true}, true},
			{"eth0", map[string]bool{"10.9.9.8": true}, false},
			{"eth1", map[string]bool{"10.9.9.9": true}, false},
		} {
			got, err := NetNSHolds(path, tc.ifname, tc.ips)
			if err != nil {
				return err
			}
			if got != tc.want {
				return errors.New("NetNSHolds(" + tc.ifname + ") = " + map[bool]string{true: "true", false: "false"}[got])
			}
		}
		return nil
	})
	_, err := NetNSHolds("/nonexistent/netns", "eth0", map[string]bool{"10.9.9.9": true})
	require.Error(t, err)
	host, err := NetNSHolds("/proc/self/ns/net", "eth0-none", map[string]bool{"10.9.9.9": true})
	require.NoError(t, err)
	assert.False(t, host)
}
