package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/release"
)

// holdLock takes the flock of key's lock file as another process would,
// with holder written into it, until the test ends.
func holdLock(t *testing.T, f *fixture, key cache.Key, holder cache.Holder) {
	t.Helper()
	p := lockPath(f.cacheDir, key)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	require.NoError(t, unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB))
	data, err := json.Marshal(holder)
	require.NoError(t, err)
	_, err = unix.Pwrite(fd, data, 0)
	require.NoError(t, err)
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func doctorChecks(t *testing.T, f *fixture, args ...string) (map[string]check, []string, int) {
	t.Helper()
	out, stderr, code := f.run(append([]string{"doctor", "--json"}, args...)...)
	res := decodeJSON[doctorOutput](t, out)
	byName := map[string]check{}
	var names []string
	for _, c := range res.Checks {
		byName[c.Check] = c
		names = append(names, c.Check)
	}
	assert.Equal(t, code == 0, res.OK, "ok is the exit status; stderr: %s", stderr)
	return byName, names, code
}

func TestDoctorHealthy(t *testing.T) {
	f := newFixture(t, "okplug", "okplug")
	f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded, cache.StepAdded)
	key := cache.Key{Network: testNet, ContainerID: "c-adding", IfName: "eth0"}
	f.save("c-adding", "eth0", cache.PhaseAdding, time.Minute, []string{"okplug"}, cache.StepAdded, cache.StepStarting)
	holdLock(t, f, key, cache.Holder{PID: os.Getpid(), Verb: "ADD", Since: f.now.Add(-time.Second)})
	require.NoError(t, os.WriteFile(filepath.Join(f.cacheDir, "locks", testNet, "c-gone:eth0.lock"), nil, 0o600))

	checks, names, code := doctorChecks(t, f)
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"config", "catena plugin", "delegate 0 (okplug)", "delegate 1 (okplug)", "cache dir", "records", "locks"}, names)
	for _, c := range checks {
		assert.Equal(t, statusOK, c.Status, "%s: %s", c.Check, c.Detail)
	}
	assert.Contains(t, checks["delegate 0 (okplug)"].Detail, filepath.Join(f.cniDir, "okplug")+" supports cniVersion 1.1.0")
	assert.Equal(t, "1 complete, 1 in flight, none stuck in teardown", checks["records"].Detail)
	assert.Contains(t, checks["locks"].Detail, "1 held by running operations, 1 left by holders that died")
	require.Len(t, checks["locks"].Items, 1)
	assert.Contains(t, checks["locks"].Items[0], fmt.Sprintf(`c-adding:eth0.lock held by {"pid":%d,"verb":"ADD"`, os.Getpid()))
	assert.Contains(t, checks["cache dir"].Detail, fmt.Sprintf("owned by uid %d", os.Geteuid()))

	out, stderr, code := f.run("doctor")
	assert.Equal(t, 0, code, stderr)
	rows := tableRows(out)
	require.GreaterOrEqual(t, len(rows), 2, out)
	assert.Equal(t, []string{"catenactl", release.Version, "(commit"}, rows[0][:3], "the first line names catenactl's version")
	assert.Equal(t, []string{"CHECK", "STATUS", "DETAIL"}, rows[1])
	assert.True(t, hasRow(rows, "records", "ok", "1", "complete,"), out)
	assert.Equal(t, slices.Repeat([]string{"VERSION -"}, 6), f.calls(), "two runs: catena and both delegates were asked VERSION, nothing else")
}

// TestDoctorNamesCatenactl: doctor's first line, and its JSON's catenactl
// field, give catenactl's version and commit, problems or not.
func TestDoctorNamesCatenactl(t *testing.T) {
	f := newFixture(t, "okplug", "nosuchplug")
	want := `^` + regexp.QuoteMeta(release.Version) + ` \(commit ([0-9a-f]{1,12}(, modified)?|unknown)\)$`

	out, stderr, code := f.run("doctor", "--json")
	assert.Equal(t, 1, code, stderr)
	assert.Regexp(t, want, decodeJSON[doctorOutput](t, out).Catenactl)

	out, stderr, code = f.run("doctor")
	assert.Equal(t, 1, code, stderr)
	first, _, _ := strings.Cut(out, "\n")
	assert.Regexp(t, want, strings.TrimPrefix(first, "catenactl "), out)
	assert.True(t, strings.HasPrefix(first, "catenactl v"), out)
}

func TestDoctorProblems(t *testing.T) {
	stuckKey := cache.Key{Network: testNet, ContainerID: "c-stuck", IfName: "eth0"}
	tests := []struct {
		name      string
		delegates []string
		setup     func(t *testing.T, f *fixture)
		check     string // the check that must report a problem
		wantText  string // in its detail or items
		wantHint  string
		// alsoProblem is a check that fails as a consequence.
		alsoProblem string
	}{
		{name: "missing delegate binary", delegates: []string{"okplug", "nosuchplug"},
			check: "delegate 1 (nosuchplug)", wantText: `"nosuchplug" not found in CNI_PATH`, wantHint: "install the nosuchplug plugin"},
		{name: "incompatible delegate version", delegates: []string{"oldplug"},
			check: "delegate 0 (oldplug)", wantText: "supports 0.3.1, not cniVersion 1.1.0", wantHint: "delegates[0].cniVersion"},
		{name: "broken delegate binary", delegates: []string{"okplug"}, setup: func(t *testing.T, f *fixture) {
			require.NoError(t, os.WriteFile(filepath.Join(f.cniDir, "okplug"), []byte("#!/bin/sh\nexit 3\n"), 0o755))
		}, check: "delegate 0 (okplug)", wantText: "does not answer VERSION", wantHint: "CNI_COMMAND=VERSION"},
		{name: "invalid config", setup: func(t *testing.T, f *fixture) {
			require.NoError(t, os.WriteFile(f.confPath, []byte(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"catena","delegates":[{"type":"a/b"}]}]}`), 0o644))
		}, check: "config", wantText: "delegates[0].type", wantHint: "fix the file", alsoProblem: "cache dir"},
		{name: "cache dir modes", setup: func(t *testing.T, f *fixture) {
			dir := filepath.Join(f.cacheDir, "records", testNet)
			require.NoError(t, os.Chmod(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644))
			require.NoError(t, os.Symlink("/etc", filepath.Join(f.cacheDir, "records", "evil")))
		}, check: "cache dir", wantText: "records/podnet: mode 0755, want 0700", wantHint: "chmod 0700"},
		{name: "cache dir is a symlink", setup: func(t *testing.T, f *fixture) {
			real := f.cacheDir + ".real"
			require.NoError(t, os.Rename(f.cacheDir, real))
			require.NoError(t, os.Symlink(real, f.cacheDir))
		}, check: "cache dir", wantText: "is a symlink", wantHint: "real directory", alsoProblem: "records"}, // no record is read through the link
		{name: "record stuck in teardown", setup: func(t *testing.T, f *fixture) {
			f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug"}, cache.StepAdded, cache.StepDelFailed)
		}, check: "records", wantText: "podnet/c-stuck/eth0 needs-teardown, 1 teardown attempt(s); still held: delegate 0 (okplug) added; delegate 1 (okplug) del-failed: okplug fails on purpose; last error: earlier DEL failed",
			wantHint: "catenactl repair --abandon"},
		{name: "operation whose process died", setup: func(t *testing.T, f *fixture) {
			f.save("c-stuck", "eth0", cache.PhaseAdding, time.Hour, []string{"okplug"}, cache.StepStarting)
		}, check: "records", wantText: "podnet/c-stuck/eth0 adding", wantHint: "catenactl repair"},
		{name: "unreadable record", setup: func(t *testing.T, f *fixture) {
			require.NoError(t, os.WriteFile(filepath.Join(f.cacheDir, "records", testNet, "c-bad:eth0.json"), []byte("x\n"), 0o600))
		}, check: "records", wantText: "podnet/c-bad/eth0: load record", wantHint: "quarantine"},
		{name: "lock held by a process that is gone", setup: func(t *testing.T, f *fixture) {
			holdLock(t, f, stuckKey, cache.Holder{PID: deadPID(t), Verb: "DEL", Since: f.now})
		}, check: "locks", wantText: "is gone", wantHint: "fuser -v"},
		{name: "lock held past lockTimeout", setup: func(t *testing.T, f *fixture) {
			holdLock(t, f, stuckKey, cache.Holder{PID: os.Getpid(), Verb: "ADD", Since: f.now.Add(-time.Hour)})
		}, check: "locks", wantText: `"verb":"ADD"`, wantHint: "code 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.delegates...)
			f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded, cache.StepAdded)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			checks, _, code := doctorChecks(t, f)
			assert.Equal(t, 1, code)
			c, found := checks[tt.check]
			require.True(t, found, "check %q in %v", tt.check, checks)
			assert.Equal(t, statusProblem, c.Status)
			assert.Contains(t, c.Detail+"\n"+strings.Join(c.Items, "\n"), tt.wantText)
			assert.Contains(t, c.Hint, tt.wantHint)
			problems := 1
			for name, other := range checks {
				if name == tt.alsoProblem {
					problems++
					assert.Equal(t, statusProblem, other.Status)
				} else if name != tt.check {
					assert.Equal(t, statusOK, other.Status, "only %s is a problem, not %s: %s %v", tt.check, name, other.Detail, other.Items)
				}
			}
			out, stderr, code := f.run("doctor")
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, fmt.Sprintf("catenactl: doctor found %d problem(s)", problems))
			assert.True(t, hasRow(tableRows(out), strings.Fields(tt.check+" problem")...), out)
			assert.Contains(t, out, "hint: "+c.Hint)
		})
	}
}

// TestDoctorWithoutConfig still checks the cache dir given by --cache-dir.
func TestDoctorWithoutConfig(t *testing.T) {
	f := newFixture(t)
	f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug"}, cache.StepDelFailed)
	require.NoError(t, os.Remove(f.confPath))
	out, _, code := f.runRaw("doctor", "--json", "--cache-dir", f.cacheDir)
	assert.Equal(t, 1, code)
	res := decodeJSON[doctorOutput](t, out)
	require.Len(t, res.Checks, 4)
	assert.Equal(t, "config", res.Checks[0].Check)
	assert.Contains(t, res.Checks[0].Detail, "no network config with a catena entry in "+f.netDir)
	assert.Equal(t, "records", res.Checks[2].Check)
	assert.Equal(t, statusProblem, res.Checks[2].Status)
}

// TestDoctorAutoDelegate: a delegate whose cniVersion is "auto" is checked
// for a version it shares with catena, and the check names the one catena
// calls it at; one that shares none is a problem.
func TestDoctorAutoDelegate(t *testing.T) {
	f := newFixture(t, "okplug")
	f.writeConf("10-podnet.conflist", fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[
		{"type":"catena","cacheDir":%q,"delegates":[{"type":"oldplug","cniVersion":"auto"},{"type":"okplug","cniVersion":"auto"}]}]}`, testNet, f.cacheDir))
	checks, _, code := doctorChecks(t, f)
	assert.Equal(t, 0, code)
	assert.Equal(t, statusOK, checks["delegate 0 (oldplug)"].Status)
	assert.Contains(t, checks["delegate 0 (oldplug)"].Detail, "supports 0.3.1: catena calls it at 0.3.1 (cniVersion auto)")
	assert.Contains(t, checks["delegate 1 (okplug)"].Detail, "catena calls it at 1.1.0 (cniVersion auto)")

	require.NoError(t, os.WriteFile(filepath.Join(f.cniDir, "oldplug"), []byte("#!/bin/sh\necho '{\"cniVersion\":\"9.0.0\",\"supportedVersions\":[\"9.0.0\"]}'\n"), 0o755))
	checks, _, code = doctorChecks(t, f)
	assert.Equal(t, 1, code)
	c := checks["delegate 0 (oldplug)"]
	assert.Equal(t, statusProblem, c.Status)
	assert.Contains(t, c.Detail, "none of which catena converts")
	assert.Contains(t, c.Hint, "delegates[0].cniVersion")
}
