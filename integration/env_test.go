package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// cniPath is a private CNI bin dir: freshly built catena and test plugins,
// plus the pinned reference plugins from bin/cni (installed by
// scripts/install-deps.sh).
var cniPath string

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	dir, err := os.MkdirTemp("", "catena-it-bin-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for name, pkg := range map[string]string{
		"catena": "./plugins/catena", "failer": "./plugins/testing/failer",
		"calicostub": "./plugins/testing/calicostub", "spy": "./plugins/testing/spy",
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("building %s: %w\n%s", pkg, err, out)
		}
	}
	ref := os.Getenv("CATENA_CNI_PATH")
	if ref == "" {
		ref = filepath.Join(root, "bin", "cni")
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "tuning", "loopback", "firewall"} {
		src := filepath.Join(ref, p)
		if _, err := os.Stat(src); err != nil {
			return 0, fmt.Errorf("reference plugin %s missing (run `make plugins`): %w", p, err)
		}
		if err := os.Symlink(src, filepath.Join(dir, p)); err != nil {
			return 0, err
		}
	}
	// flannel (scripts/install-flannel.sh), ptp and bandwidth only if
	// built: their tests say what to run when they are missing
	// (requireFlannel, requireCalico)
	for _, p := range []string{"flannel", "ptp", "bandwidth"} {
		if src := filepath.Join(ref, p); fileExists(src) {
			if err := os.Symlink(src, filepath.Join(dir, p)); err != nil {
				return 0, err
			}
		}
	}
	cniPath = dir
	return m.Run(), nil
}

// requireRoot fails under CI=true and skips elsewhere when not root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("integration tests need root (CI=true: they must run, not skip)")
	}
	t.Skip("integration tests need root")
}
