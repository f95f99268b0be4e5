package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conf renders a failer netconf with the given extra fields.
func conf(t *testing.T, cniVersion string, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{"cniVersion": cniVersion, "name": "testnet", "type": "failer"}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func cmdArgs(stdin []byte) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "ctr1",
		Netns:       "/var/run/netns/test",
		IfName:      "eth0",
		StdinData:   stdin,
	}
}

// cniErr asserts that err is a CNI error with the given code and returns a
// copy of it.
func cniErr(t *testing.T, err error, code uint) types.Error {
	t.Helper()
	require.Error(t, err)
	var e *types.Error
	require.True(t, errors.As(err, &e), "not a CNI error: %T %v", err, err)
	assert.Equal(t, code, e.Code, "error: %v", e)
	assert.Contains(t, e.Msg, "failer")
	return *e
}

func TestParseConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, c *NetConf)
	}{
		{
			name: "defaults",
			in:   `{"name":"n","type":"failer"}`,
			check: func(t *testing.T, c *NetConf) {
				assert.Equal(t, "0.1.0", c.CNIVersion)
				assert.Equal(t, uint(100), c.errorCode())
				assert.Equal(t, time.Duration(0), c.hangAdd)
				assert.Equal(t, time.Duration(0), c.hangGC)
				assert.Equal(t, 60*time.Second, c.waitTimeout)
			},
		},
		{
			name: "all fields",
			in: `{"cniVersion":"1.1.0","name":"n","type":"failer","failAdd":true,"failDel":true,
				"failCheck":true,"failStatus":true,"errorCode":0,"faultFile":"/f","hangAdd":"150ms","hangGC":"3s",
				"waitFile":"/w","waitTimeout":"2s","delRequiresAdd":true,"stateDir":"/s","logFile":"/l"}`,
			check: func(t *testing.T, c *NetConf) {
				assert.True(t, c.FailAdd && c.FailDel && c.FailCheck && c.FailStatus && c.DelRequiresAdd)
				assert.Equal(t, uint(0), c.errorCode())
				assert.Equal(t, 150*time.Millisecond, c.hangAdd)
				assert.Equal(t, 3*time.Second, c.hangGC)
				assert.Equal(t, 2*time.Second, c.waitTimeout)
				assert.Equal(t, "/f", c.FaultFile)
				assert.Equal(t, "/w", c.WaitFile)
				assert.Equal(t, "/s", c.StateDir)
				assert.Equal(t, "/l", c.LogFile)
			},
		},
		{name: "bad json", in: `{`, wantErr: "decode netconf"},
		{name: "negative errorCode", in: `{"errorCode":-1}`, wantErr: "decode netconf"},
		{name: "bad hangAdd", in: `{"hangAdd":"soon"}`, wantErr: "invalid hangAdd"},
		{name: "negative hangAdd", in: `{"hangAdd":"-1s"}`, wantErr: "negative duration"},
		{name: "bad hangGC", in: `{"hangGC":"later"}`, wantErr: "invalid hangGC"},
		{name: "negative hangGC", in: `{"hangGC":"-2s"}`, wantErr: "invalid hangGC \"-2s\": negative duration"},
		{name: "bad waitTimeout", in: `{"waitTimeout":"x"}`, wantErr: "invalid waitTimeout"},
		{name: "delRequiresAdd without stateDir", in: `{"delRequiresAdd":true}`, wantErr: "needs stateDir"},
		{name: "pidFile without hangAdd", in: `{"pidFile":"/p"}`, wantErr: "pidFile needs hangAdd"},
		{name: "pidFile with zero hangAdd", in: `{"pidFile":"/p","hangAdd":"0s"}`, wantErr: "pidFile needs hangAdd"},
		{
			name:  "pidFile with hangAdd",
			in:    `{"pidFile":"/p","hangAdd":"1s"}`,
			check: func(t *testing.T, c *NetConf) { assert.Equal(t, "/p", c.PidFile) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConf([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestLoadErrorCodes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code uint
	}{
		{name: "decode failure", in: `{`, code: types.ErrDecodingFailure},
		{name: "invalid config", in: `{"hangAdd":"x"}`, code: types.ErrInvalidNetworkConfig},
		{name: "invalid hangGC", in: `{"hangGC":"x"}`, code: types.ErrInvalidNetworkConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := add(cmdArgs([]byte(tc.in)))
			cniErr(t, err, tc.code)
			cniErr(t, cmdGC(cmdArgs([]byte(tc.in))), tc.code)
		})
	}
}

// prevResult is a 1.0.0 result as bridge would hand down a chain.
const prevResult = `{"cniVersion":"1.0.0",
	"interfaces":[{"name":"cni0","mac":"aa:bb:cc:dd:ee:ff"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:00","sandbox":"/var/run/netns/test"}],
	"ips":[{"address":"10.22.0.5/16","gateway":"10.22.0.1","interface":1}],
	"routes":[{"dst":"0.0.0.0/0"}],
	"dns":{}}`

func TestAddResultAllVersions(t *testing.T) {
	for _, ver := range version.All.SupportedVersions() {
		t.Run("empty/"+ver, func(t *testing.T) {
			res, err := add(cmdArgs(conf(t, ver, nil)))
			require.NoError(t, err)
			assert.Equal(t, ver, res.Version())
			var buf bytes.Buffer
			require.NoError(t, res.PrintTo(&buf))
			assert.NotContains(t, buf.String(), "10.22.0.5")
		})
		t.Run("prevResult/"+ver, func(t *testing.T) {
			ok, err := version.GreaterThanOrEqualTo(ver, "0.3.0")
			require.NoError(t, err)
			if !ok {
				// Pre-0.3.0 configs cannot carry a 1.0.0-shaped prevResult.
				t.Skip("prevResult needs cniVersion >= 0.3.0")
			}
			var prev map[string]any
			require.NoError(t, json.Unmarshal([]byte(prevResult), &prev))
			prev["cniVersion"] = ver
			res, err := add(cmdArgs(conf(t, ver, map[string]any{"prevResult": prev})))
			require.NoError(t, err)
			assert.Equal(t, ver, res.Version())
			cur, err := current.NewResultFromResult(res)
			require.NoError(t, err)
			require.Len(t, cur.IPs, 1)
			assert.Equal(t, "10.22.0.5/16", cur.IPs[0].Address.String())
			assert.Len(t, cur.Interfaces, 2)
		})
	}
}

func TestInjectedFailures(t *testing.T) {
	type verbFunc func(*skel.CmdArgs) error
	addFn := func(a *skel.CmdArgs) error { _, err := add(a); return err }
	tests := []struct {
		name   string
		fn     verbFunc
		fields map[string]any
		code   uint // 0 means success expected
		msg    string
	}{
		{name: "add ok", fn: addFn},
		{name: "add default code", fn: addFn, fields: map[string]any{"failAdd": true}, code: 100, msg: "injected ADD failure"},
		{name: "add custom code", fn: addFn, fields: map[string]any{"failAdd": true, "errorCode": 142}, code: 142, msg: "injected ADD failure"},
		{name: "failDel does not affect add", fn: addFn, fields: map[string]any{"failDel": true}},
		{name: "del ok", fn: cmdDel},
		{name: "del fails", fn: cmdDel, fields: map[string]any{"failDel": true, "errorCode": 101}, code: 101, msg: "injected DEL failure"},
		{name: "check ok", fn: cmdCheck},
		{name: "check fails", fn: cmdCheck, fields: map[string]any{"failCheck": true}, code: 100, msg: "injected CHECK failure"},
		{name: "status ok", fn: cmdStatus},
		{name: "status fails with 50", fn: cmdStatus, fields: map[string]any{"failStatus": true, "errorCode": 120}, code: types.ErrPluginNotAvailable, msg: "injected STATUS failure"},
		{name: "gc ok", fn: cmdGC, fields: map[string]any{"failAdd": true, "failDel": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fn(cmdArgs(conf(t, "1.1.0", tc.fields)))
			if tc.code == 0 {
				require.NoError(t, err)
				return
			}
			e := cniErr(t, err, tc.code)
			assert.Contains(t, e.Msg, tc.msg)
			assert.Contains(t, e.Details, "containerID=ctr1")
		})
	}
}

func TestFaultFile(t *testing.T) {
	dir := t.TempDir()
	fault := filepath.Join(dir, "fault")
	stdin := conf(t, "1.1.0", map[string]any{"failAdd": true, "failDel": true, "failCheck": true, "failStatus": true, "faultFile": fault})
	verbs := []struct {
		name string
		fn   func(*skel.CmdArgs) error
	}{
		{"ADD", func(a *skel.CmdArgs) error { _, err := add(a); return err }},
		{"DEL", cmdDel},
		{"CHECK", cmdCheck},
		{"STATUS", cmdStatus},
	}
	for _, v := range verbs {
		t.Run(v.name+" lifted without file", func(t *testing.T) {
			require.NoError(t, v.fn(cmdArgs(stdin)))
		})
	}
	f, err := os.Create(fault)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	t.Cleanup(func() { _ = os.Remove(fault) })
	for _, v := range verbs {
		t.Run(v.name+" active with file", func(t *testing.T) {
			require.Error(t, v.fn(cmdArgs(stdin)))
		})
	}
	require.NoError(t, os.Remove(fault))
	for _, v := range verbs {
		t.Run(v.name+" lifted again", func(t *testing.T) {
			require.NoError(t, v.fn(cmdArgs(stdin)))
		})
	}
}

func TestHangAdd(t *testing.T) {
	start := time.Now()
	_, err := add(cmdArgs(conf(t, "1.0.0", map[string]any{"hangAdd": "200ms"})))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
}

// TestHangGC: GC logs its invocation, sleeps hangGC, and only then logs
// its valid list; without logFile it still sleeps.
func TestHangGC(t *testing.T) {
	start := time.Now()
	require.NoError(t, cmdGC(&skel.CmdArgs{StdinData: conf(t, "1.1.0", map[string]any{"hangGC": "200ms"})}))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	logFile := filepath.Join(t.TempDir(), "calls.log")
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		done <- cmdGC(&skel.CmdArgs{StdinData: conf(t, "1.1.0", map[string]any{"hangGC": "300ms", "logFile": logFile})})
	}()
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(logFile)
		return err == nil && string(data) == "GC - - -\n"
	}, 250*time.Millisecond, 5*time.Millisecond, "the invocation is logged before the hang")
	data, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Equal(t, "GC - - -\n", string(data), "no GC-VALID during the hang")
	require.NoError(t, <-done)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	data, err = os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Equal(t, "GC - - -\nGC-VALID \n", string(data))
}

func TestWaitFile(t *testing.T) {
	tests := []struct {
		name     string
		createIn time.Duration // <0: never
		timeout  string
		wantErr  bool
	}{
		{name: "already there", createIn: 0, timeout: "1s"},
		{name: "appears later", createIn: 100 * time.Millisecond, timeout: "5s"},
		{name: "times out", createIn: -1, timeout: "100ms", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait := filepath.Join(t.TempDir(), "go")
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			if tc.createIn >= 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(tc.createIn)
					if f, err := os.Create(wait); err == nil {
						_ = f.Close()
					}
				}()
			}
			start := time.Now()
			_, err := add(cmdArgs(conf(t, "1.1.0", map[string]any{"waitFile": wait, "waitTimeout": tc.timeout, "errorCode": 130})))
			if tc.wantErr {
				e := cniErr(t, err, 130)
				assert.Contains(t, e.Msg, "timed out")
				assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
				return
			}
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), tc.createIn)
		})
	}
}

func TestDelRequiresAdd(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	stdin := conf(t, "1.1.0", map[string]any{"delRequiresAdd": true, "stateDir": stateDir})
	args := cmdArgs(stdin)
	state := filepath.Join(stateDir, "ctr1-eth0")

	steps := []struct {
		name      string
		run       func() error
		wantErr   string
		wantState bool
	}{
		{name: "del before add fails", run: func() error { return cmdDel(args) }, wantErr: "without a prior successful ADD"},
		{name: "add writes state", run: func() error { _, err := add(args); return err }, wantState: true},
		{name: "repeated add keeps state", run: func() error { _, err := add(args); return err }, wantState: true},
		{name: "del removes state", run: func() error { return cmdDel(args) }},
		{name: "second del fails", run: func() error { return cmdDel(args) }, wantErr: "no state file"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := s.run()
			if s.wantErr != "" {
				e := cniErr(t, err, 100)
				assert.Contains(t, e.Msg, s.wantErr)
			} else {
				require.NoError(t, err)
			}
			_, statErr := os.Stat(state)
			assert.Equal(t, s.wantState, statErr == nil, "state file presence")
		})
	}

	t.Run("failed add writes no state", func(t *testing.T) {
		stdin := conf(t, "1.1.0", map[string]any{"delRequiresAdd": true, "stateDir": stateDir, "failAdd": true})
		_, err := add(cmdArgs(stdin))
		require.Error(t, err)
		_, statErr := os.Stat(state)
		assert.True(t, os.IsNotExist(statErr))
	})

	t.Run("no temp files left", func(t *testing.T) {
		entries, err := os.ReadDir(stateDir)
		require.NoError(t, err)
		assert.Empty(t, entries)
	})
}

func TestLogFile(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "calls.log")
	stdin := conf(t, "1.1.0", map[string]any{"logFile": logFile, "failDel": true})

	_, err := add(cmdArgs(stdin))
	require.NoError(t, err)
	require.Error(t, cmdDel(cmdArgs(stdin)))
	require.NoError(t, cmdCheck(cmdArgs(stdin)))
	require.NoError(t, cmdStatus(&skel.CmdArgs{StdinData: stdin}))
	require.NoError(t, cmdGC(&skel.CmdArgs{StdinData: stdin}))
	withValid := conf(t, "1.1.0", map[string]any{"logFile": logFile,
		"cni.dev/valid-attachments": []map[string]string{{"containerID": "b", "ifname": "eth0"}, {"containerID": "a", "ifname": "net1"}}})
	require.NoError(t, cmdGC(&skel.CmdArgs{StdinData: withValid}))

	data, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"ADD ctr1 eth0 /var/run/netns/test",
		"DEL ctr1 eth0 /var/run/netns/test",
		"CHECK ctr1 eth0 /var/run/netns/test",
		"STATUS - - -",
		"GC - - -",
		"GC-VALID ",
		"GC - - -",
		"GC-VALID a/net1 b/eth0",
		"",
	}, "\n"), string(data))
}

func TestLogFileConcurrentAppends(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "calls.log")
	const workers, perWorker = 16, 50
	long := strings.Repeat("x", 200) // make lines long enough to expose interleaving
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				args := &skel.CmdArgs{ContainerID: fmt.Sprintf("c%d-%d-%s", w, i, long), IfName: "eth0", Netns: "/ns"}
				assert.NoError(t, logInvocation(logFile, "ADD", args))
			}
		}()
	}
	wg.Wait()

	data, err := os.ReadFile(logFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, lines, workers*perWorker)
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		require.Len(t, f, 4, "torn line %q", l)
		assert.Equal(t, "ADD", f[0])
		assert.True(t, strings.HasSuffix(f[1], long), "torn line %q", l)
		seen[f[1]] = true
	}
	assert.Len(t, seen, workers*perWorker)
}
