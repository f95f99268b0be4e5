//go:build linux

package libchain

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writtenBytes is this process's wchar: every byte it passed to write(2)
// and its kin, whatever the file.
func writtenBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	require.NoError(t, sc.Err())
	t.Fatal("no wchar in /proc/self/io")
	return 0
}

// addWriteCost is the bytes one ADD of a chain of n bridge-like delegates
// writes through the real on-disk store.
func addWriteCost(t *testing.T, n int) int64 {
	t.Helper()
	ds := make([]string, n)
	ds[0] = dIPAM
	for i := 1; i < n; i++ {
		ds[i] = fmt.Sprintf(`{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.rp_filter":"1"},"mtu":1450,"bridge":"cni%d","isGateway":true,"ipMasq":true,"hairpinMode":true}`, i)
	}
	conf := chainConf(t, "1.1.0", ds...)
	// Real fsyncs, 65 of them: the fakes' 200 ms bound is for timing
	// tests, and a loaded machine's disk missed it.
	conf.DelegateTimeout = 10 * time.Second
	dir := t.TempDir()
	store := diskStore(dir)
	eng := &Engine{Store: store, Exec: newFakeExec()}
	r := req(conf, fmt.Sprintf("wc%d", n))
	before := writtenBytes(t)
	_, err := eng.Add(context.Background(), r)
	after := writtenBytes(t)
	require.NoError(t, err)
	return after - before
}

// TestAddWriteCostOfLongestChain measures what an ADD of a chain of
// MaxDelegates delegates writes to disk. Each step appends a delta of the
// steps it changed (cache/delta.go), not the whole record, so the cost is
// linear in the chain: per delegate, the longest chain writes about what a
// chain of 8 does. The figures are logged for the record.
func TestAddWriteCostOfLongestChain(t *testing.T) {
	small := addWriteCost(t, 8)
	full := addWriteCost(t, MaxDelegates)
	perSmall, perFull := small/8, full/int64(MaxDelegates)
	t.Logf("ADD write cost: 8 delegates %d bytes (%d per delegate), %d delegates %d bytes (%d per delegate)",
		small, perSmall, MaxDelegates, full, perFull)
	assert.LessOrEqual(t, 2*perFull, 3*perSmall,
		"per delegate, an ADD of %d delegates writes at most 1.5x what one of 8 does", MaxDelegates)
}
