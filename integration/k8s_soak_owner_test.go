package integration

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The owner invariant: no DEL is ever handed an address that another live
// attachment holds at that moment. The soak's chain has the spy
// (plugins/testing/spy) right after flannel, so that it is handed
// flannel's result: its log says, for each ADD, CHECK and DEL, when it ran
// (one clock for every process of the host), on which attachment, and
// with which addresses. An attachment holds an address from the ADD that
// returned it until its own DEL starts; a DEL of any other attachment
// handed that address meanwhile is a break, whatever it went on to free.

// soakSpyLog is the spy's log in its logDir.
const soakSpyLog = "spy.log"

// spyCall is one line of the spy's log.
type spyCall struct {
	mono             int64 // CLOCK_MONOTONIC, ns
	wall             time.Time
	verb, id, ifname string
	ips              []string
}

func (c spyCall) key() string { return c.id + "/" + c.ifname }

func (c spyCall) String() string {
	return fmt.Sprintf("%s of %s at %s", c.verb, short(c.id)+"/"+c.ifname, c.wall.Format("15:04:05.000000"))
}

// parseSpyLog parses the spy's log: its complete lines (a last line
// without its newline is still being written), and those it cannot parse.
func parseSpyLog(raw string) (calls []spyCall, bad []string) {
	lines := strings.Split(raw, "\n")
	for _, l := range lines[:len(lines)-1] {
		c, err := parseSpyLine(l)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q: %v", l, err))
			continue
		}
		calls = append(calls, c)
	}
	return calls, bad
}

// parseSpyLine parses "<mono ns> <wall> <VERB> <containerID> <ifname> <IPs>".
func parseSpyLine(l string) (spyCall, error) {
	f := strings.Split(l, " ")
	if len(f) != 6 {
		return spyCall{}, fmt.Errorf("%d fields, want 6", len(f))
	}
	mono, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || mono <= 0 {
		return spyCall{}, fmt.Errorf("monotonic time %q", f[0])
	}
	wall, err := time.Parse(time.RFC3339Nano, f[1])
	if err != nil {
		return spyCall{}, err
	}
	if !slices.Contains([]string{"ADD", "DEL", "CHECK"}, f[2]) {
		return spyCall{}, fmt.Errorf("verb %q", f[2])
	}
	c := spyCall{mono: mono, wall: wall, verb: f[2], id: f[3], ifname: f[4]}
	if f[5] != "-" {
		c.ips = strings.Split(f[5], ",")
	}
	return c, nil
}

// ownerCheck is what checkOwners found.
type ownerCheck struct {
	adds, dels, checks int
	delsWithIP         int // DELs handed at least one address
	attachments        int
	// overlaps are ADDs returning an address another attachment held by
	// the log: a teardown the spy did not see, or an address given twice
	overlaps   int
	violations []ownerViolation
}

// ownerViolation is a DEL handed an address another attachment held.
type ownerViolation struct {
	del, holderAdd spyCall
	ip             string
}

func (v ownerViolation) String() string {
	return fmt.Sprintf("%s handed %s, held by %s since its %s", v.del, v.ip, v.holderAdd.key(), v.holderAdd)
}

// holding is one attachment's hold of one address: from the ADD that
// returned it (add) until its next DEL starts (end; 0 while it holds it).
type holding struct {
	add spyCall
	end int64
}

// checkOwners checks the owner invariant over the spy's calls, in any
// order: they are ordered by their monotonic time. Each DEL's addresses
// are checked against the holdings of every other attachment at that
// instant; a DEL of the holder itself, however stale, is its own.
func checkOwners(calls []spyCall) ownerCheck {
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b spyCall) int { return cmp.Compare(a.mono, b.mono) })
	var r ownerCheck
	open := map[string]map[string]*holding{} // attachment -> address -> holding
	byIP := map[string][]*holding{}
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.key()] = true
		switch c.verb {
		case "ADD":
			r.adds++
			if open[c.key()] == nil {
				open[c.key()] = map[string]*holding{}
			}
			for _, ip := range c.ips {
				if slices.ContainsFunc(byIP[ip], func(h *holding) bool { return h.add.key() != c.key() && h.end == 0 }) {
					r.overlaps++
				}
				if open[c.key()][ip] == nil { // held since an earlier ADD: still since then
					h := &holding{add: c}
					open[c.key()][ip] = h
					byIP[ip] = append(byIP[ip], h)
				}
			}
		case "DEL":
			r.dels++
			if len(c.ips) > 0 {
				r.delsWithIP++
			}
			for _, h := range open[c.key()] {
				h.end = c.mono
			}
			delete(open, c.key())
		case "CHECK":
			r.checks++
		}
	}
	r.attachments = len(seen)
	for _, c := range calls {
		if c.verb != "DEL" {
			continue
		}
		for _, ip := range c.ips {
			for _, h := range byIP[ip] {
				if h.add.key() != c.key() && h.add.mono <= c.mono && (h.end == 0 || c.mono < h.end) {
					r.violations = append(r.violations, ownerViolation{del: c, holderAdd: h.add, ip: ip})
				}
			}
		}
	}
	return r
}

// ownerInvariant reads the spy's log and checks the owner invariant on it.
// It is final: a DEL once handed another's address stays in the log.
func (s *soakRun) ownerInvariant(t *testing.T) soakInvariant {
	start := time.Now()
	raw, err := os.ReadFile(filepath.Join(s.spyDir, soakSpyLog))
	require.NoError(t, err, "the spy's log")
	calls, bad := parseSpyLog(string(raw))
	r := checkOwners(calls)
	s.owner, s.ownerTook = r, time.Since(start)
	value := fmt.Sprintf("%d DELs checked, %d with an IP, %d violations", r.dels, r.delsWithIP, len(r.violations))
	for i, v := range r.violations {
		if i == 5 {
			value += fmt.Sprintf("; and %d more", len(r.violations)-i)
			break
		}
		value += "; " + v.String()
	}
	if len(bad) > 0 {
		value += fmt.Sprintf("; %d lines unreadable, the first %s", len(bad), bad[0])
	}
	return soakInvariant{name: "no DEL handed a live IP", value: value, ok: len(r.violations) == 0 && len(bad) == 0, final: true}
}

// spyLog is a spy log of lines "<mono> <VERB> <containerID> <IPs>" on
// eth0, the wall time made from the monotonic one.
func spyLog(lines ...string) string {
	base := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	var b strings.Builder
	for _, l := range lines {
		f := strings.Fields(l)
		mono, _ := strconv.ParseInt(f[0], 10, 64)
		ifname := "eth0"
		if id, ifn, ok := strings.Cut(f[2], "/"); ok {
			f[2], ifname = id, ifn
		}
		fmt.Fprintf(&b, "%d %s %s %s %s %s\n", mono, base.Add(time.Duration(mono)).Format(time.RFC3339Nano), f[1], f[2], ifname, f[3])
	}
	return b.String()
}

// TestSoakOwnerCheck shows what the owner check counts and catches: a
// stale DEL handed the address another attachment took after the first
// one's teardown is caught; the holder's own DELs, DELs of a freed address
// and lines out of order are not breaks.
func TestSoakOwnerCheck(t *testing.T) {
	tests := []struct {
		name                         string
		log                          string
		dels, withIP, overlaps, adds int
		violations                   []string // "<DEL's container> <ip> <holder>"
	}{
		{name: "empty log"},
		{name: "an address freed and given again", adds: 2, dels: 2, withIP: 2,
			log: spyLog("10 ADD a 10.0.0.5", "20 DEL a 10.0.0.5", "30 ADD b 10.0.0.5", "40 DEL b 10.0.0.5")},
		{name: "a stale DEL of the first holder while the second holds it", adds: 2, dels: 2, withIP: 2,
			log:        spyLog("10 ADD a 10.0.0.5", "20 DEL a 10.0.0.5", "30 ADD b 10.0.0.5", "40 DEL a 10.0.0.5"),
			violations: []string{"a 10.0.0.5 b"}},
		{name: "a DEL with the address once freed is no break", adds: 2, dels: 3, withIP: 3,
			log: spyLog("10 ADD a 10.0.0.5", "20 DEL a 10.0.0.5", "30 ADD b 10.0.0.5", "40 DEL b 10.0.0.5", "50 DEL a 10.0.0.5")},
		{name: "the holder's own repeated DELs", adds: 1, dels: 3, withIP: 2,
			log: spyLog("10 ADD a 10.0.0.5", "20 DEL a 10.0.0.5", "30 DEL a 10.0.0.5", "40 DEL a -")},
		{name: "a DEL with no prevResult is checked, with nothing to check", adds: 1, dels: 1,
			log: spyLog("10 ADD a 10.0.0.5", "20 DEL b -")},
		{name: "lines out of order are ordered by their monotonic time", adds: 2, dels: 1, withIP: 1,
			log: spyLog("10 ADD a 10.0.0.5", "40 ADD b 10.0.0.5", "30 DEL a 10.0.0.5")},
		{name: "an address of a second ADD is held from that ADD on", adds: 3, dels: 3, withIP: 3,
			log:        spyLog("10 ADD a 10.0.0.5", "20 ADD c 10.0.0.6", "25 DEL c 10.0.0.6", "30 DEL b 10.0.0.6", "40 ADD a 10.0.0.5,10.0.0.6", "50 DEL b 10.0.0.6"),
			violations: []string{"b 10.0.0.6 a"}},
		{name: "another interface of the same container is another attachment", adds: 1, dels: 1, withIP: 1,
			log:        spyLog("10 ADD a/eth0 10.0.0.5", "20 DEL a/net1 10.0.0.5"),
			violations: []string{"a 10.0.0.5 a"}},
		{name: "a CHECK holds nothing", adds: 0, dels: 1, withIP: 1,
			log: spyLog("10 CHECK a 10.0.0.5", "20 DEL b 10.0.0.5")},
		{name: "an address ADDed twice is an overlap, its DELs breaks", adds: 2, dels: 1, withIP: 1, overlaps: 1,
			log:        spyLog("10 ADD a 10.0.0.5", "20 ADD b 10.0.0.5", "30 DEL b 10.0.0.5"),
			violations: []string{"b 10.0.0.5 a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls, bad := parseSpyLog(tc.log)
			require.Empty(t, bad)
			r := checkOwners(calls)
			var got []string
			for _, v := range r.violations {
				got = append(got, v.del.id+" "+v.ip+" "+v.holderAdd.id)
			}
			require.Equal(t, tc.violations, got, "violations")
			require.Equal(t, []int{tc.adds, tc.dels, tc.withIP, tc.overlaps}, []int{r.adds, r.dels, r.delsWithIP, r.overlaps}, "ADDs, DELs, DELs with an IP, overlaps")
		})
	}
}

// TestParseSpyLog shows that a line being written is left for later and a
// line that does not parse is reported.
func TestParseSpyLog(t *testing.T) {
	log := spyLog("10 ADD a 10.0.0.5,fd00::5", "20 DEL a -")
	calls, bad := parseSpyLog(log + "30 DEL")
	require.Empty(t, bad)
	require.Len(t, calls, 2)
	require.Equal(t, []string{"10.0.0.5", "fd00::5"}, calls[0].ips)
	require.Nil(t, calls[1].ips)
	_, bad = parseSpyLog("x ADD\n" + log + "0 2026-12-02T01:00:00Z DEL a eth0 -\n10 2026-12-02T01:00:00Z GC a eth0 -\n")
	require.Len(t, bad, 3)
}
