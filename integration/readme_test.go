package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeCommandTimeout bounds one README command: `make demo` is the
// longest, under a minute once installed, about 2 minutes cold.
const readmeCommandTimeout = 10 * time.Minute

// TestReadmeCommands runs every runnable command of README.md's shell blocks
// (the convention is in readme_blocks_test.go), as a reader would paste
// them: the quick start's `make demo` (under a minute once installed:
// `make test` has installed and built everything before it runs this) and
// the catenactl examples on a node fixture. A command fails the test when it
// exits non-zero or prints an error; skipped blocks are skipped subtests,
// with their reason.
func TestReadmeCommands(t *testing.T) {
	requireRoot(t)
	root := repoRoot()
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := parseReadme(string(text))
	require.NoError(t, err)
	require.NotEmpty(t, blocks, "README.md has no shell block")

	var node *readmeNode
	for _, b := range blocks {
		t.Run(fmt.Sprintf("README.md:%d", b.line), func(t *testing.T) {
			if b.skip != "" {
				t.Skipf("not run: %s", b.skip)
			}
			values := map[string]string{}
			var wrap []string
			if b.fixture == "node" {
				if node == nil {
					node = newReadmeNode(t)
				}
				values["container"] = node.container
				wrap = node.wrap()
			}
			for _, c := range b.commands {
				cmdline, err := c.expand(values)
				require.NoError(t, err)
				out, err := runReadmeCommand(root, wrap, cmdline)
				t.Logf("README.md:%d: $ %s\n%s", c.line, cmdline, out)
				require.NoError(t, err, "README.md:%d: `%s` failed:\n%s", c.line, cmdline, out)
				if l := readmeErrorLine.FindString(out); l != "" {
					t.Fatalf("README.md:%d: `%s` exited 0 but printed an error (%q):\n%s", c.line, cmdline, l, out)
				}
			}
		})
	}
}

// runReadmeCommand runs one command in bash with pipefail, from the repo
// root, with bin/ first in PATH, under wrap (a command prefix, or none),
// and returns its stdout and stderr together. A make of the test's own make
// (make test) is not passed down: the command runs as if typed.
func runReadmeCommand(root string, wrap []string, cmdline string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readmeCommandTimeout)
	defer cancel()
	args := append(append([]string{}, wrap...), "bash", "-o", "pipefail", "-c", cmdline)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	env := []string{"PATH=" + filepath.Join(root, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
		default:
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("README command %q: %w", cmdline, err)
	}
	return string(out), nil
}

// readmeNode is the fixture of the `<!-- run: node -->` blocks: overlays of
// /etc and /var/lib, on the test's temp dir, that a command sees in a
// private mount namespace; the host's own are left untouched. In them,
// /etc/cni/net.d/10-podnet.conflist (catena over loopback, the default
// cache dir) and, under /var/lib/cni/catena, the record of one attachment,
// added by cnitool into a netns of the test.
type readmeNode struct {
	dir       string
	container string
}

const readmeNodeNetwork = "podnet"

func newReadmeNode(t *testing.T) *readmeNode {
	t.Helper()
	n := &readmeNode{dir: t.TempDir()}
	for _, d := range []string{"etc/up", "etc/work", "lib/up", "lib/work"} {
		require.NoError(t, os.MkdirAll(filepath.Join(n.dir, d), 0o700))
	}
	name := fmt.Sprintf("readme%d-%d", os.Getpid()%100000, seq.Add(1))
	netns := "/var/run/netns/" + name
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n.container = cnitoolContainerID(netns)

	conflist := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"catena","delegates":[{"type":"loopback"}]}]}`, readmeNodeNetwork)
	setup := fmt.Sprintf(`mkdir -p /etc/cni/net.d && printf '%%s\n' '%s' > /etc/cni/net.d/10-%s.conflist && `+
		`NETCONFPATH=/etc/cni/net.d CNI_PATH=%q cnitool add %s %s`, conflist, readmeNodeNetwork, cniPath, readmeNodeNetwork, netns)
	out, err := runReadmeCommand(repoRoot(), n.wrap(), setup)
	require.NoError(t, err, "setting up the README's node fixture: %s", out)
	return n
}

// wrap is the prefix that runs a command in a private mount namespace
// with the fixture's overlays over /etc and /var/lib.
func (n *readmeNode) wrap() []string {
	mounts := fmt.Sprintf(`set -e
mount -t overlay catena-readme -o lowerdir=/etc,upperdir=%[1]s/etc/up,workdir=%[1]s/etc/work /etc
mount -t overlay catena-readme -o lowerdir=/var/lib,upperdir=%[1]s/lib/up,workdir=%[1]s/lib/work /var/lib
exec "$@"`, n.dir)
	return []string{"unshare", "-m", "--propagation", "private", "bash", "-c", mounts, "readme-node"}
}
