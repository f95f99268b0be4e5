package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cmd/internal/cli"
)

// TestTrustedProxiesFlag: the CIDRs of --secure-metrics-trusted-proxies
// become the endpoint's trusted proxies, masked; none by default; a value
// that is not a CIDR is a usage error.
func TestTrustedProxiesFlag(t *testing.T) {
	opts, err := (&secureFlags{}).options()
	require.NoError(t, err)
	assert.Empty(t, opts.TrustedProxies)

	opts, err = (&secureFlags{trustedProxies: []string{"10.1.2.3/8", " 2001:db8::/64"}}).options()
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/64")}, opts.TrustedProxies)

	_, err = (&secureFlags{trustedProxies: []string{"10.1.2.3"}}).options()
	var usage *cli.UsageError
	require.ErrorAs(t, err, &usage)
	assert.Contains(t, err.Error(), `--secure-metrics-trusted-proxies "10.1.2.3": not a CIDR`)
}
