package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnusableLogFileFallsBackToStderr: whatever is wrong with logFile,
// every verb still runs (DEL must never wedge), its log goes to stderr, and
// stderr says so once. A FIFO nobody reads must not block catena either.
func TestUnusableLogFileFallsBackToStderr(t *testing.T) {
	bin := buildCatena(t)
	tests := []struct {
		name    string
		logFile func(t *testing.T, dir string) string
	}{
		{"missing directory", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope", "catena.log") }},
		{"symlink", func(t *testing.T, dir string) string {
			target := filepath.Join(dir, "target.log")
			link := filepath.Join(dir, "catena.log")
			require.NoError(t, os.Symlink(target, link))
			return link
		}},
		{"directory", func(t *testing.T, dir string) string { return dir }},
		{"FIFO without a reader", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "catena.log")
			require.NoError(t, syscall.Mkfifo(p, 0o600))
			return p
		}},
	}
	for _, tt := range tests {
		for _, verb := range []string{"DEL", "ADD"} {
			t.Run(tt.name+"/"+verb, func(t *testing.T) {
				dir := t.TempDir()
				logFile := tt.logFile(t, dir)
				conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","type":"catena","cacheDir":%q,"logFile":%q,"delegates":[{"type":"nosuchplugin"}]}`,
					filepath.Join(dir, "cache"), logFile)
				env := map[string]string{"CNI_COMMAND": verb, "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_PATH": dir}
				if verb == "ADD" {
					// ADD needs a netns; DEL, with none, runs skel's
					// checks of it not at all.
					env["CNI_NETNS"] = "/proc/self/ns/net"
				}
				inv := runCatena(t, bin, env, conf)
				stderr := string(inv.stderr)
				assert.Equal(t, 1, strings.Count(stderr, "logging to stderr"), "stderr says so once: %s", stderr)
				assert.Contains(t, stderr, logFile)
				if verb == "DEL" {
					require.NoError(t, inv.err, "DEL without a record succeeds: stdout %s stderr %s", inv.stdout, stderr)
					assert.Empty(t, inv.stdout)
					return
				}
				// ADD runs and fails for its own reason (no such plugin),
				// and that failure is logged on stderr.
				require.Error(t, inv.err)
				assert.Contains(t, string(inv.stdout), "nosuchplugin")
				assert.Contains(t, stderr, "operation failed")
				_, err := os.Lstat(filepath.Join(dir, "target.log"))
				assert.ErrorIs(t, err, os.ErrNotExist, "nothing written through a symlink")
			})
		}
	}
}
