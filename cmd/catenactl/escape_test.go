package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/clitest"
)

// hostile is delegate text that would act on a terminal if printed raw: an
// OSC title change ended by BEL, a clear screen, a carriage return that
// overwrites the line, NUL, the C1 CSI, a right-to-left override and bytes
// that are not UTF-8.
const hostile = "boom\x1b]0;owned\x07\x1b[2J\rhidden\x00\u009b31m\u202eevil\x7f\xff\xfe end"

// evilPlugin fails VERSION and DEL with hostile text in its CNI error, and
// succeeds otherwise.
func evilPlugin(t *testing.T, f *fixture) {
	t.Helper()
	cniErr, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "code": 11, "msg": hostile})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.cniDir, "evilplug.json"), cniErr, 0o644))
	script := "#!/bin/sh\ncat >/dev/null\ncase \"$CNI_COMMAND\" in\nVERSION|DEL) cat \"$(dirname \"$0\")/evilplug.json\"; exit 1 ;;\nesac\nexit 0\n"
	require.NoError(t, os.WriteFile(filepath.Join(f.cniDir, "evilplug"), []byte(script), 0o755))
}

// TestHostileTextIsEscaped: text that a delegate controls, stored in a
// record (errors, args) or in a key (an ifname may hold ESC), and a
// plugin's error, reach the terminal escaped in show, list, doctor and
// repair, and on stderr; JSON output carries it exactly, escaped by JSON.
func TestHostileTextIsEscaped(t *testing.T) {
	f := newFixture(t, "okplug", "evilplug")
	evilPlugin(t, f)
	types := []string{"okplug", "evilplug"}
	for _, ifname := range []string{"eth0", "e\x1b[31m\u202e"} {
		rec := f.save("c-evil", ifname, cache.PhaseNeedsTeardown, time.Hour, types, cache.StepAdded, cache.StepDelFailed)
		rec.LastError, rec.AddError, rec.Args = hostile, hostile, "K8S_POD_NAME="+hostile
		rec.Steps[0].Error, rec.Steps[1].DelError = hostile, hostile
		rec.Steps[1].Result = json.RawMessage(`{"msg":"\u001b[2J"}`)
		require.NoError(t, f.store.Save(rec))
	}

	// An unreadable record: show's error on stderr names its key.
	bad := filepath.Join(f.cacheDir, "records", testNet, "c-bad:e\x1b[2J.json")
	require.NoError(t, os.WriteFile(bad, []byte("junk\x1b[2J\n"), 0o600))
	_, stderr, code := f.run("show", "c-bad")
	assert.Equal(t, 1, code)
	clitest.AssertTerminalSafe(t, stderr, "show of an unreadable record: stderr")
	assert.Contains(t, stderr, `record of podnet/c-bad/e\x1b[2J: `)
	require.NoError(t, os.Remove(bad))

	escaped := `boom\x1b]0;owned\x07\x1b[2J\rhidden`
	for _, args := range [][]string{{"show", "c-evil"}, {"list"}, {"doctor"}} {
		out, stderr, code := f.run(args...)
		assert.NotEqual(t, 2, code, "%v: %s", args, stderr)
		clitest.AssertTerminalSafe(t, out, fmt.Sprint(args, " stdout"))
		clitest.AssertTerminalSafe(t, stderr, fmt.Sprint(args, " stderr"))
		if args[0] != "list" {
			assert.Contains(t, out, escaped, "%v shows the text, escaped", args)
		}
	}
	out, stderr, code := f.run("show", "c-evil", "--json")
	require.Equal(t, 0, code, stderr)
	clitest.AssertTerminalSafe(t, out, "show --json")
	recs := decodeJSON[[]cache.Record](t, out)
	require.Len(t, recs, 2)
	want := string([]rune(hostile)) // as stored: invalid UTF-8 became U+FFFD
	assert.Equal(t, want, recs[0].LastError, "JSON carries the text exactly")
	assert.Equal(t, "e\x1b[31m\u202e", recs[0].Key.IfName)

	out, _, _ = f.run("doctor", "--json")
	clitest.AssertTerminalSafe(t, out, "doctor --json")
	assert.Contains(t, out, `boom\u001b]0;owned\u0007\u001b[2J\rhidden\u0000\u009b31m\u202eevil\u007f`, "the plugin's error")

	// repair runs evilplug's DEL, which fails with the hostile text: the
	// report on stdout and the error on stderr.
	for _, ifname := range []string{"eth0", "e\x1b[31m\u202e"} {
		rec, err := f.store.Load(cache.Key{Network: testNet, ContainerID: "c-evil", IfName: ifname})
		require.NoError(t, err)
		rec.Args = "" // CNI_ARGS cannot carry NUL
		require.NoError(t, f.store.Save(rec))
	}
	for _, args := range [][]string{{"repair"}, {"repair", "--json"}} {
		out, stderr, code = f.run(args...)
		assert.Equal(t, 1, code, "%v: %s", args, stderr)
		clitest.AssertTerminalSafe(t, out, fmt.Sprint(args, " stdout"))
		clitest.AssertTerminalSafe(t, stderr, fmt.Sprint(args, " stderr"))
	}
	assert.Contains(t, out, `boom\u001b]0;owned`, "repair --json")
	out, _, _ = f.run("repair")
	assert.Contains(t, out, escaped, "repair")
}

func TestWriteJSONEscapesWhatEncodingJSONLeaves(t *testing.T) {
	v := map[string]any{
		"text": "a\x1b[2J\u009b\u202e\x7f\u2066b\n",
		"raw":  json.RawMessage("{\"k\":\"x\xffy\u0085\"}"),
	}
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, v))
	out := buf.String()
	clitest.AssertTerminalSafe(t, out, "writeJSON")
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got), out)
	assert.Equal(t, "a\x1b[2J\u009b\u202e\x7f\u2066b\n", got["text"], "the escapes mean the same characters")
	assert.Equal(t, map[string]any{"k": "x\uFFFDy\u0085"}, got["raw"])
	assert.Contains(t, out, `a\u001b[2J\u009b\u202e\u007f\u2066b\n`)
}
