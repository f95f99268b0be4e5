package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// variant is one way of running the chain: catena wrapping the delegates,
// or the same delegates as a plain conflist.
type variant struct {
	name     string
	wrapped  bool // catena wraps the delegates
	network  string
	bridge   string
	subnet   string
	hostPort int    // sequential runs; concurrent ones add the attachment's index
	dir      string // host-local's dataDir lives here
	cache    string // catena's cacheDir (wrapped only)
	netDir   string // NETCONFPATH
}

// writeConflist writes v's conflist into v.netDir.
func (v *variant) writeConflist() error {
	if err := os.MkdirAll(v.netDir, 0o755); err != nil {
		return fmt.Errorf("create netconf dir: %w", err)
	}
	return writeFile(filepath.Join(v.netDir, "10-"+v.network+".conflist"), renderConflist(v))
}

// bench owns everything the run creates, and cleans it up.
type bench struct {
	opts        options
	cnitoolPath string
	tmp         string
	catena      *variant
	plain       *variant

	mu sync.Mutex
	// live netns (name -> variant whose ADD may have run in it), for cleanup.
	live map[string]*variant
}

func newBench(o options) (_ *bench, err error) {
	tmp, err := os.MkdirTemp("", "catena-bench-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	b := &bench{opts: o, cnitoolPath: filepath.Join(o.binDir, "cnitool"), tmp: tmp, live: map[string]*variant{}}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	pid := os.Getpid()
	octet := pid%250 + 1
	b.catena = &variant{name: "catena", wrapped: true, network: fmt.Sprintf("catena-bench-a-%d", pid), bridge: trunc(fmt.Sprintf("cba%d", pid), 15),
		subnet: fmt.Sprintf("10.251.%d.0/24", octet), hostPort: 18181}
	b.plain = &variant{name: "plain", network: fmt.Sprintf("catena-bench-b-%d", pid), bridge: trunc(fmt.Sprintf("cbb%d", pid), 15),
		subnet: fmt.Sprintf("10.252.%d.0/24", octet), hostPort: 28182}
	for _, v := range b.variants() {
		v.dir = filepath.Join(tmp, v.name)
		v.cache = filepath.Join(v.dir, "cache")
		v.netDir = filepath.Join(v.dir, "net.d")
		if err := v.writeConflist(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// variants lists both variants; order returns them in the order of round
// i, alternating which goes first, so that neither always runs on a cache
// warmed (or a disk dirtied) by the other.
func (b *bench) variants() []*variant { return []*variant{b.catena, b.plain} }

func (b *bench) order(i int) []*variant {
	if i%2 == 1 {
		return []*variant{b.plain, b.catena}
	}
	return b.variants()
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// delegates renders the three plugins of the chain, without cniVersion/name
// (catena and libcni inject those).
func delegates(v *variant, dataDir string) string {
	return fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}},`+
		`{"type":"portmap","capabilities":{"portMappings":true}},`+
		`{"type":"tuning","sysctl":{"net.core.somaxconn":"512"}}`,
		v.bridge, dataDir, v.subnet)
}

// renderConflist returns the conflist of v: host-local's dataDir is under
// v.dir, catena's cacheDir is v.cache.
func renderConflist(v *variant) []byte {
	dataDir := filepath.Join(v.dir, "host-local")
	plugins := delegates(v, dataDir)
	if v.wrapped {
		plugins = fmt.Sprintf(`{"type":"catena","cacheDir":%q,"lockTimeout":"30s","delegateTimeout":"60s",`+
			`"capabilities":{"portMappings":true},"delegates":[%s]}`, v.cache, plugins)
	}
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`+"\n", v.network, plugins)
}

func writeFile(path string, data []byte) error {
	return createWith(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// createWith creates (or truncates) path and lets write fill it.
func createWith(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// addNetns creates a netns for v, remembered for cleanup, and returns its
// path.
func (b *bench) addNetns(name string, v *variant) (string, error) {
	if err := ipCmd("netns", "add", name); err != nil {
		return "", err
	}
	b.mu.Lock()
	b.live[name] = v
	b.mu.Unlock()
	return filepath.Join("/var/run/netns", name), nil
}

// delNetns deletes a netns whose attachment was DELed.
func (b *bench) delNetns(name string) error {
	b.mu.Lock()
	delete(b.live, name)
	b.mu.Unlock()
	return ipCmd("netns", "del", name)
}

// cleanup DELs whatever may still be attached (so plugins remove their
// iptables rules and host-local frees its IPs), then removes netns, bridges
// and the temp dir.
func (b *bench) cleanup() error {
	var errs []error
	for ns, v := range b.live {
		if _, err := b.invoke(call{v: v, verb: "del", netns: filepath.Join("/var/run/netns", ns), port: v.hostPort}); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
		if err := b.delNetns(ns); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
	}
	for _, v := range b.variants() {
		// The bridge exists only if an ADD ever ran; a missing one is fine.
		if err := exec.Command("ip", "link", "show", v.bridge).Run(); err == nil {
			if err := ipCmd("link", "del", v.bridge); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: %w", err))
			}
		}
	}
	if err := os.RemoveAll(b.tmp); err != nil {
		errs = append(errs, fmt.Errorf("cleanup: remove %s: %w", b.tmp, err))
	}
	return errors.Join(errs...)
}
