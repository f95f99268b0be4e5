package integration

import (
	"context"
	"fmt"
	"io/fs"
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

// docPages are the pages whose shell blocks TestDocCommands runs:
// README.md, CONTRIBUTING.md and every page under docs/, in that order.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md"}
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, rerr := filepath.Rel(root, p)
			if rerr != nil {
				return fmt.Errorf("docs page %s: %w", p, rerr)
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return err
	}))
	return pages
}

// TestDocCommands runs every runnable command of the shell blocks of
// README.md, CONTRIBUTING.md and docs/**/*.md (the convention is in
// readme_blocks_test.go), as a reader would paste them: the quick start's
// `make demo` (under a minute once installed: `make test` has installed
// and built everything before it runs this) and the catenactl examples on
// a node fixture. A command fails the test when it exits non-zero or
// prints an error; skipped blocks are skipped subtests, with their reason.
// A subtest is named by page and line, slashes as underscores:
// -run 'TestDocCommands/docs_catenactl.md' runs one page.
func TestDocCommands(t *testing.T) {
	requireRoot(t)
	root := repoRoot()
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		blocks, err := parseReadme(page, string(text))
		require.NoError(t, err)
		if page == "README.md" {
			require.NotEmpty(t, blocks, "README.md has no shell block")
		}
		for _, b := range blocks {
			t.Run(fmt.Sprintf("%s:%d", strings.ReplaceAll(page, "/", "_"), b.line), func(t *testing.T) {
				if b.skip != "" {
					t.Skipf("not run: %s", b.skip)
				}
				values := map[string]string{}
				var wrap []string
				if b.fixture == "node" {
					// A fixture per block: a block sees no other's changes.
					node := newReadmeNode(t)
					values["container"] = node.container
					wrap = node.wrap()
				}
				for _, c := range b.commands {
					cmdline, err := c.expand(values)
					require.NoError(t, err)
					out, err := runReadmeCommand(root, wrap, cmdline)
					t.Logf("%s:%d: $ %s\n%s", page, c.line, cmdline, out)
					require.NoError(t, err, "%s:%d: `%s` failed:\n%s", page, c.line, cmdline, out)
					if l := readmeErrorLine.FindString(out); l != "" {
						t.Fatalf("%s:%d: `%s` exited 0 but printed an error (%q):\n%s", page, c.line, cmdline, l, out)
					}
				}
			})
		}
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
		return string(out), fmt.Errorf("docs command %q: %w", cmdline, err)
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
