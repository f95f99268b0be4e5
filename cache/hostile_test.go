//go:build linux

package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// Hostile records, through the engine: a record that is torn, flipped,
// forged, from the future, a link, a directory or readable by others never
// panics, is never followed, and never wedges DEL; a record that cannot be
// trusted is moved to quarantine/ byte for byte. (disk_os_test.go and
// codec_test.go check Load and Decode alone on the same inputs.)

// recExec is an executor whose delegates succeed and are only recorded.
type recExec struct {
	mu    sync.Mutex
	calls []string
}

func (e *recExec) Add(_ context.Context, c libchain.Call) (types.Result, error) {
	e.note(c)
	return &current.Result{CNIVersion: "1.1.0", IPs: []*current.IPConfig{{
		Address: net.IPNet{IP: net.IPv4(10, 0, 0, 7), Mask: net.CIDRMask(24, 32)}}}}, nil
}

func (e *recExec) Run(_ context.Context, c libchain.Call) error {
	e.note(c)
	return nil
}

func (e *recExec) note(c libchain.Call) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, c.Verb+" "+c.Type)
}

func (e *recExec) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.calls
	e.calls = nil
	return out
}

// hostileRig is an engine over a real DiskStore.
type hostileRig struct {
	fs    afero.Fs
	dir   string
	store *cache.DiskStore
	exec  *recExec
	eng   *libchain.Engine
	req   libchain.Request
}

var allDels = []string{"DEL tuning", "DEL portmap", "DEL bridge"}

// newHostileRig: on the real disk (with flock) if fsys is an OsFs, else on
// fsys with in-process locks.
func newHostileRig(t *testing.T, fsys afero.Fs) *hostileRig {
	t.Helper()
	dir := "/var/lib/cni/catena"
	var locker cache.Locker = cache.NewMemLocker()
	if _, ok := fsys.(*afero.OsFs); ok {
		dir = filepath.Join(t.TempDir(), "catena")
		locker = cache.NewFlockLocker(filepath.Join(dir, "locks"))
	}
	conf, err := libchain.ParseConfig([]byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"podnet","type":"catena",
	  "cacheDir":%q,"delegates":[{"type":"bridge"},{"type":"portmap"},{"type":"tuning"}]}`, dir)))
	require.NoError(t, err)
	h := &hostileRig{fs: fsys, dir: dir, store: cache.NewDiskStore(fsys, dir, locker), exec: &recExec{}}
	h.eng = &libchain.Engine{Store: h.store, Exec: h.exec}
	h.req = libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{ContainerID: "c1", IfName: "eth0", NetNS: "/var/run/netns/c1"}}
	return h
}

// add runs a complete ADD and returns the record file: four
// entries (three "starting" writes and the completion).
func (h *hostileRig) add(t *testing.T) []byte {
	t.Helper()
	_, err := h.eng.Add(t.Context(), h.req)
	require.NoError(t, err)
	h.exec.take()
	data, err := afero.ReadFile(h.fs, h.store.Path(h.req.Key()))
	require.NoError(t, err)
	require.Equal(t, 4, bytes.Count(data, []byte("\n")))
	return data
}

// place replaces the record file with data, and empties quarantine/.
func (h *hostileRig) place(t *testing.T, data []byte) {
	t.Helper()
	require.NoError(t, h.fs.RemoveAll(filepath.Join(h.dir, "quarantine")))
	path := h.store.Path(h.req.Key())
	require.NoError(t, h.fs.RemoveAll(path))
	require.NoError(t, afero.WriteFile(h.fs, path, data, 0o600))
}

// quarantined lists quarantine/.
func (h *hostileRig) quarantined(t *testing.T) []string {
	t.Helper()
	infos, err := afero.ReadDir(h.fs, filepath.Join(h.dir, "quarantine"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, fi := range infos {
		out = append(out, filepath.Join(h.dir, "quarantine", fi.Name()))
	}
	return out
}

// del runs DEL, which must succeed and leave no record, and a second DEL,
// which must invoke nothing. It returns the delegates the first DEL called
// and the content of what it quarantined (nil if nothing), and empties
// quarantine/.
func (h *hostileRig) del(t *testing.T, msg string) (calls []string, quarantined string) {
	t.Helper()
	require.Empty(t, h.quarantined(t), msg)
	require.NotPanics(t, func() { require.NoError(t, h.eng.Del(t.Context(), h.req), msg) }, msg)
	calls = h.exec.take()
	_, err := h.store.Load(h.req.Key())
	require.ErrorIs(t, err, cache.ErrNotFound, "%s: the record is gone", msg)
	require.NoError(t, h.eng.Del(t.Context(), h.req), msg)
	require.Empty(t, h.exec.take(), "%s: a second DEL invokes nothing", msg)
	q := h.quarantined(t)
	require.LessOrEqual(t, len(q), 1, "%s: quarantined %v", msg, q)
	if len(q) == 0 {
		return calls, ""
	}
	return calls, q[0]
}

// delQuarantines runs del and asserts that the record was moved aside
// intact and every delegate of the config got its best-effort DEL.
func (h *hostileRig) delQuarantines(t *testing.T, data []byte, msg string) {
	t.Helper()
	calls, q := h.del(t, msg)
	require.NotEmpty(t, q, "%s: quarantined", msg)
	got, err := afero.ReadFile(h.fs, q)
	require.NoError(t, err)
	require.Equal(t, data, got, "%s: kept aside byte for byte", msg)
	require.Equal(t, allDels, calls, msg)
}

// TestHostileRecordFileTruncatedAtEveryByte: a record file cut anywhere gives its
// newest entry that verifies; only a cut inside the first entry leaves
// nothing to trust, and then the file is quarantined. DEL always succeeds
// and tears down what the surviving entry holds.
func TestHostileRecordFileTruncatedAtEveryByte(t *testing.T) {
	h := newHostileRig(t, afero.NewMemMapFs())
	full := h.add(t)
	first := bytes.IndexByte(full, '\n') + 1
	quarantined := 0
	for n := 0; n < len(full); n++ {
		msg := fmt.Sprintf("cut to %d of %d bytes", n, len(full))
		h.place(t, full[:n])
		rec, lerr := h.store.Load(h.req.Key())
		if n < first-1 { // the newline is not needed to verify
			require.ErrorIs(t, lerr, cache.ErrCorrupt, msg)
			h.delQuarantines(t, full[:n], msg)
			quarantined++
			continue
		}
		require.NoError(t, lerr, msg)
		calls, q := h.del(t, msg)
		require.Empty(t, q, "%s: a torn tail is not corruption", msg)
		var want []string
		for i := len(rec.Steps) - 1; i >= 0; i-- {
			if rec.Steps[i].Held() {
				want = append(want, "DEL "+rec.Steps[i].Type)
			}
		}
		require.Equal(t, want, calls, msg)
	}
	t.Logf("%d cuts: %d quarantined (inside the first entry), the rest torn down from the newest entry that verifies", len(full), quarantined)
}

// TestHostileRecordFileBitFlips flips one bit of every byte of the record file as
// it stands after each of an ADD's four writes. Whatever the flip, DEL
// tears down every delegate that the newest entry says is held: that entry
// still verifies, or the file is quarantined and every delegate gets its
// best-effort DEL. (Falling back to an older entry would be wrong: the
// newest was acknowledged, and the delegate it started may hold resources
// the older one does not mention.)
func TestHostileRecordFileBitFlips(t *testing.T) {
	h := newHostileRig(t, afero.NewMemMapFs())
	full := h.add(t)
	flips, quarantined := 0, 0
	end := 0
	for stage := 1; stage <= 4; stage++ {
		end += bytes.IndexByte(full[end:], '\n') + 1
		file := full[:end]
		h.place(t, file)
		newest, err := h.store.Load(h.req.Key())
		require.NoError(t, err)
		var want []string
		for i := len(newest.Steps) - 1; i >= 0; i-- {
			if newest.Steps[i].Held() {
				want = append(want, "DEL "+newest.Steps[i].Type)
			}
		}
		for i := range file {
			data := bytes.Clone(file)
			data[i] ^= 1 << (i % 8)
			msg := fmt.Sprintf("after write %d, bit %d of byte %d (%q)", stage, i%8, i, file[i])
			h.place(t, data)
			calls, q := h.del(t, msg)
			flips++
			if q != "" {
				got, err := afero.ReadFile(h.fs, q)
				require.NoError(t, err)
				require.Equal(t, data, got, msg)
				require.Equal(t, allDels, calls, msg)
				quarantined++
				continue
			}
			require.Equal(t, want, calls, msg)
		}
	}
	t.Logf("%d flips: %d quarantined, the rest read the newest entry intact", flips, quarantined)
}

// TestHostileRecordsThroughDel: one DEL through the engine on the real
// disk for each kind of hostile record.
func TestHostileRecordsThroughDel(t *testing.T) {
	type prep func(t *testing.T, h *hostileRig, full []byte) []byte // returns what must be quarantined, nil to skip the check
	last := func(full []byte) []byte {
		lines := bytes.SplitAfter(bytes.TrimSuffix(full, []byte("\n")), []byte("\n"))
		return append(bytes.Clone(lines[len(lines)-1]), '\n')
	}
	write := func(data []byte) prep {
		return func(t *testing.T, h *hostileRig, _ []byte) []byte { h.place(t, data); return data }
	}
	tests := []struct {
		name string
		prep prep
	}{
		{"zero-length", write([]byte{})},
		{"only newlines", write([]byte("\n\n\n"))},
		{"wrong checksum", func(t *testing.T, h *hostileRig, full []byte) []byte {
			e := last(full)
			at := bytes.Index(e, []byte(`"sha256":"`)) + len(`"sha256":"`)
			if e[at] == '0' { // another hex digit: still valid JSON
				e[at] = '1'
			} else {
				e[at] = '0'
			}
			h.place(t, e)
			return e
		}},
		{"future schema", func(t *testing.T, h *hostileRig, full []byte) []byte {
			e := bytes.Replace(last(full), []byte(`{"schema":1,`), []byte(`{"schema":99,`), 1)
			h.place(t, e)
			return e
		}},
		{"group writable", func(t *testing.T, h *hostileRig, full []byte) []byte {
			require.NoError(t, os.Chmod(h.store.Path(h.req.Key()), 0o620))
			return full
		}},
		{"world readable", func(t *testing.T, h *hostileRig, full []byte) []byte {
			require.NoError(t, os.Chmod(h.store.Path(h.req.Key()), 0o644))
			return full
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostileRig(t, afero.NewOsFs())
			want := tt.prep(t, h, h.add(t))
			h.delQuarantines(t, want, tt.name)
			_, err := h.eng.Add(t.Context(), h.req)
			require.NoError(t, err, "the attachment can be added again")
		})
	}
}

// TestHostileEntriesThroughDel: where the record should be there is a link
// (to a valid record of the same key outside the store, or to another
// file), a directory or a FIFO, or the network's directory is a link. DEL
// never follows the link nor blocks on the FIFO: it moves the entry itself
// to quarantine, tears every delegate down best-effort, and succeeds.
func TestHostileEntriesThroughDel(t *testing.T) {
	tests := []struct {
		name     string
		prep     func(t *testing.T, h *hostileRig, full []byte) (target string)
		wantType os.FileMode
	}{
		{"symlink to a valid record outside", func(t *testing.T, h *hostileRig, full []byte) string {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			require.NoError(t, os.WriteFile(target, full, 0o600))
			require.NoError(t, os.Remove(h.store.Path(h.req.Key())))
			require.NoError(t, os.Symlink(target, h.store.Path(h.req.Key())))
			return target
		}, os.ModeSymlink},
		{"symlink to another file", func(t *testing.T, h *hostileRig, _ []byte) string {
			target := filepath.Join(t.TempDir(), "passwd")
			require.NoError(t, os.WriteFile(target, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644))
			require.NoError(t, os.Remove(h.store.Path(h.req.Key())))
			require.NoError(t, os.Symlink(target, h.store.Path(h.req.Key())))
			return target
		}, os.ModeSymlink},
		{"dangling symlink", func(t *testing.T, h *hostileRig, _ []byte) string {
			require.NoError(t, os.Remove(h.store.Path(h.req.Key())))
			require.NoError(t, os.Symlink("/nonexistent/record.json", h.store.Path(h.req.Key())))
			return ""
		}, os.ModeSymlink},
		{"symlinked network dir", func(t *testing.T, h *hostileRig, full []byte) string {
			outside := t.TempDir()
			netDir := filepath.Dir(h.store.Path(h.req.Key()))
			target := filepath.Join(outside, filepath.Base(h.store.Path(h.req.Key())))
			require.NoError(t, os.WriteFile(target, full, 0o600))
			require.NoError(t, os.RemoveAll(netDir))
			require.NoError(t, os.Symlink(outside, netDir))
			return target
		}, os.ModeSymlink},
		{"directory", func(t *testing.T, h *hostileRig, full []byte) string {
			path := h.store.Path(h.req.Key())
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.MkdirAll(filepath.Join(path, "inner"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(path, "inner", "x.json"), full, 0o600))
			return ""
		}, os.ModeDir},
		{"fifo", func(t *testing.T, h *hostileRig, _ []byte) string {
			require.NoError(t, os.Remove(h.store.Path(h.req.Key())))
			require.NoError(t, syscall.Mkfifo(h.store.Path(h.req.Key()), 0o600))
			return ""
		}, os.ModeNamedPipe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostileRig(t, afero.NewOsFs())
			full := h.add(t)
			target := tt.prep(t, h, full)
			var before []byte
			if target != "" {
				var err error
				before, err = os.ReadFile(target)
				require.NoError(t, err)
			}
			calls, q := h.del(t, tt.name)
			require.Equal(t, allDels, calls, "best-effort DEL of every delegate of the config")
			require.NotEmpty(t, q, "quarantined")
			fi, err := os.Lstat(q)
			require.NoError(t, err)
			assert.Equal(t, tt.wantType, fi.Mode().Type(), "the entry itself is moved, not what it points to")
			if target != "" {
				after, err := os.ReadFile(target)
				require.NoError(t, err, "the link's target is still there")
				assert.Equal(t, before, after, "and untouched")
			}
			_, err = h.eng.Add(t.Context(), h.req)
			require.NoError(t, err, "the attachment can be added again")
		})
	}
}
