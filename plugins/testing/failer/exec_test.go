package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asPluginEnv makes the test binary behave as the failer plugin itself, so
// the exec tests check the real stdin/stdout/exit-code contract without a
// separate go build.
const asPluginEnv = "FAILER_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPluginEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type execResult struct {
	stdout, stderr []byte
	exitCode       int
}

func runPlugin(t *testing.T, command string, stdin []byte) execResult {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		asPluginEnv+"=1",
		"CNI_COMMAND="+command,
		"CNI_CONTAINERID=ctr-exec",
		// Not a real netns: skel only uses it to refuse the plugin's own.
		"CNI_NETNS=/var/run/netns/failer-test-does-not-exist",
		"CNI_IFNAME=eth0",
		"CNI_PATH=/nonexistent",
	)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := execResult{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		res.exitCode = ee.ExitCode()
	}
	return res
}

func TestExecContract(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "calls.log")
	tests := []struct {
		name     string
		command  string
		cniVer   string
		fields   map[string]any
		wantCode uint // 0: success
		check    func(t *testing.T, stdout []byte)
	}{
		{
			name: "add 1.1.0 empty result", command: "ADD", cniVer: "1.1.0",
			check: func(t *testing.T, out []byte) {
				assert.JSONEq(t, `{"cniVersion":"1.1.0"}`, string(out))
			},
		},
		{
			name: "add 0.3.1 empty result", command: "ADD", cniVer: "0.3.1",
			check: func(t *testing.T, out []byte) {
				assert.JSONEq(t, `{"cniVersion":"0.3.1","dns":{}}`, string(out))
			},
		},
		{
			name: "add 1.0.0 prevResult passthrough", command: "ADD", cniVer: "1.0.0",
			fields: map[string]any{"prevResult": json.RawMessage(prevResult), "logFile": logFile},
			check: func(t *testing.T, out []byte) {
				var got map[string]any
				require.NoError(t, json.Unmarshal(out, &got))
				assert.Equal(t, "1.0.0", got["cniVersion"])
				assert.Len(t, got["ips"], 1)
			},
		},
		{name: "add fails", command: "ADD", cniVer: "1.1.0", fields: map[string]any{"failAdd": true}, wantCode: 100},
		{name: "del fails", command: "DEL", cniVer: "1.1.0", fields: map[string]any{"failDel": true, "errorCode": 111}, wantCode: 111},
		{name: "del ok", command: "DEL", cniVer: "0.4.0"},
		{name: "check fails", command: "CHECK", cniVer: "1.0.0", fields: map[string]any{"failCheck": true}, wantCode: 100},
		{name: "status fails", command: "STATUS", cniVer: "1.1.0", fields: map[string]any{"failStatus": true}, wantCode: 50},
		{name: "status ok", command: "STATUS", cniVer: "1.1.0"},
		{name: "gc ok", command: "GC", cniVer: "1.1.0"},
		{name: "bad config", command: "ADD", cniVer: "1.1.0", fields: map[string]any{"hangAdd": "never"}, wantCode: types.ErrInvalidNetworkConfig},
		{
			name: "version", command: "VERSION", cniVer: "1.1.0",
			check: func(t *testing.T, out []byte) {
				pi, err := (&version.PluginDecoder{}).Decode(out)
				require.NoError(t, err)
				assert.ElementsMatch(t, version.All.SupportedVersions(), pi.SupportedVersions())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(t, tc.command, conf(t, tc.cniVer, tc.fields))
			assert.Empty(t, string(r.stderr), "stderr")
			if tc.wantCode != 0 {
				assert.Equal(t, 1, r.exitCode)
				var e types.Error
				require.NoError(t, json.Unmarshal(r.stdout, &e), "stdout %q", r.stdout)
				assert.Equal(t, tc.wantCode, e.Code)
				assert.Contains(t, e.Msg, "failer")
				return
			}
			require.Equal(t, 0, r.exitCode, "stdout %q", r.stdout)
			if tc.check != nil {
				tc.check(t, r.stdout)
			} else {
				assert.Empty(t, string(r.stdout))
			}
		})
	}

	data, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Equal(t, "ADD ctr-exec eth0 /var/run/netns/failer-test-does-not-exist\n", string(data))
}
