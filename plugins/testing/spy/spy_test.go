package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asPluginEnv makes the test binary run as the plugin itself, for the exec
// test of its stdout.
const asPluginEnv = "SPY_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPluginEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// prev031 is a primary's result at 0.3.1: two addresses.
const prev031 = `{"cniVersion":"0.3.1","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/x"}],` +
	`"ips":[{"version":"4","interface":0,"address":"10.244.0.7/24","gateway":"10.244.0.1"},` +
	`{"version":"6","interface":0,"address":"fd00::7/64"}],"dns":{}}`

// prevOf is the same result at version v, as catena hands it to a
// delegate of that version.
func prevOf(v string) string {
	if strings.HasPrefix(v, "0.") {
		return strings.Replace(prev031, `"0.3.1"`, strconv.Quote(v), 1)
	}
	p := strings.NewReplacer(`"version":"4",`, "", `"version":"6",`, "").Replace(prev031)
	return strings.Replace(p, `"0.3.1"`, strconv.Quote(v), 1)
}

func conf(t *testing.T, version, dir, prev string) []byte {
	t.Helper()
	c := fmt.Sprintf(`{"cniVersion":%q,"name":"net","type":"spy","logDir":%q`, version, dir)
	if prev != "" {
		c += `,"prevResult":` + prev
	}
	return []byte(c + "}")
}

func cmdArgs(id string, stdin []byte) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: id, IfName: "eth0", Netns: "/var/run/netns/x", StdinData: stdin}
}

// logLines are the fields of each line of dir's log.
func logLines(t *testing.T, dir string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, logName))
	require.NoError(t, err)
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 6, "line %q", l)
		lines = append(lines, f)
	}
	return lines
}

// TestAddPassesPrevResultThrough shows that ADD returns its prevResult in
// its own cniVersion and logs the prevResult's addresses.
func TestAddPassesPrevResultThrough(t *testing.T) {
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log") // made by the first call
			var out bytes.Buffer
			require.NoError(t, cmdAdd(cmdArgs("ctr-a", conf(t, v, dir, prevOf(v))), &out))
			var res map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
			assert.Equal(t, v, res["cniVersion"])
			assert.Contains(t, out.String(), `"10.244.0.7/24"`)
			assert.Contains(t, out.String(), `"fd00::7/64"`)
			l := logLines(t, dir)
			require.Len(t, l, 1)
			assert.Equal(t, []string{"ADD", "ctr-a", "eth0", "10.244.0.7,fd00::7"}, l[0][2:])
			mono, err := strconv.ParseInt(l[0][0], 10, 64)
			require.NoError(t, err)
			assert.Positive(t, mono)
		})
	}
}

// TestAddWithoutPrevResult shows that ADD with no prevResult returns an
// empty result of its version and logs no address.
func TestAddWithoutPrevResult(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, cmdAdd(cmdArgs("ctr-a", conf(t, "1.0.0", dir, "")), &out))
	assert.JSONEq(t, `{"cniVersion":"1.0.0"}`, out.String())
	assert.Equal(t, []string{"ADD", "ctr-a", "eth0", "-"}, logLines(t, dir)[0][2:])
}

// TestDelAndCheckLogWhatTheyAreHanded shows that DEL and CHECK log the
// addresses of the prevResult they are handed, or none.
func TestDelAndCheckLogWhatTheyAreHanded(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, record("DEL", cmdArgs("ctr-a", conf(t, "0.3.1", dir, prev031))))
	require.NoError(t, record("DEL", cmdArgs("ctr-b", conf(t, "0.3.1", dir, ""))))
	require.NoError(t, record("CHECK", cmdArgs("", conf(t, "1.0.0", dir, prevOf("1.0.0")))))
	l := logLines(t, dir)
	require.Len(t, l, 3)
	assert.Equal(t, []string{"DEL", "ctr-a", "eth0", "10.244.0.7,fd00::7"}, l[0][2:])
	assert.Equal(t, []string{"DEL", "ctr-b", "eth0", "-"}, l[1][2:])
	assert.Equal(t, []string{"CHECK", "-", "eth0", "10.244.0.7,fd00::7"}, l[2][2:])
	first, _ := strconv.ParseInt(l[0][0], 10, 64)
	last, _ := strconv.ParseInt(l[2][0], 10, 64)
	assert.LessOrEqual(t, first, last, "monotonic")
}

// TestFailsWhenItCannotLog shows that a call fails rather than succeed
// unlogged: no logDir, a logDir that is a file, a prevResult it cannot read.
func TestFailsWhenItCannotLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for name, stdin := range map[string][]byte{
		"no logDir":         []byte(`{"cniVersion":"1.0.0","name":"net","type":"spy"}`),
		"logDir a file":     conf(t, "1.0.0", file, ""),
		"prevResult broken": conf(t, "1.0.0", t.TempDir(), `{"cniVersion":"1.0.0","ips":7}`),
		"not JSON":          []byte(`{`),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			assert.Error(t, cmdAdd(cmdArgs("ctr-a", stdin), &out))
			assert.Empty(t, out.String())
			assert.Error(t, record("DEL", cmdArgs("ctr-a", stdin)))
		})
	}
}

// TestConcurrentCallsNeverInterleave shows that lines written at once by
// many calls, each opening the log as a process would, stay whole.
func TestConcurrentCallsNeverInterleave(t *testing.T) {
	dir := t.TempDir()
	const calls = 200
	long := strings.Repeat("c", 500) // a line well past any small buffer
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			errs <- record("DEL", cmdArgs(fmt.Sprintf("%s-%03d", long, i), conf(t, "0.3.1", dir, prev031)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	l := logLines(t, dir)
	require.Len(t, l, calls)
	seen := map[string]bool{}
	for _, f := range l {
		assert.Equal(t, "10.244.0.7,fd00::7", f[5])
		seen[f[3]] = true
	}
	assert.Len(t, seen, calls)
}

// TestExecStdout shows, on the binary's real stdin and stdout, that ADD
// prints only its result, DEL, STATUS and GC nothing, and that STATUS and
// GC log nothing.
func TestExecStdout(t *testing.T) {
	dir := t.TempDir()
	run := func(verb string, stdin []byte) string {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), asPluginEnv+"=1", "CNI_COMMAND="+verb, "CNI_CONTAINERID=ctr-exec",
			"CNI_NETNS=/var/run/netns/spy-test-does-not-exist", "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent")
		cmd.Stdin = bytes.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%s: %s", verb, stderr.String())
		return stdout.String()
	}
	out := run("ADD", conf(t, "1.0.0", dir, prevOf("1.0.0")))
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Empty(t, run("DEL", conf(t, "1.0.0", dir, prevOf("1.0.0"))))
	assert.Empty(t, run("STATUS", conf(t, "1.1.0", dir, "")))
	assert.Empty(t, run("GC", []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","type":"spy","logDir":%q,"cni.dev/valid-attachments":[]}`, dir))))
	l := logLines(t, dir)
	require.Len(t, l, 2)
	assert.Equal(t, "ADD", l[0][2])
	assert.Equal(t, "DEL", l[1][2])
}
