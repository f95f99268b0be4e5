package cache

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// FuzzKeyValidate checks the validation of the CNI arguments that name an
// attachment (network name, CNI_CONTAINERID, CNI_IFNAME): a key that
// validates maps to files strictly inside the store (record, teardown note,
// lock), back to itself when listed, and through a record's JSON; a key that does not validate is
// refused by every store operation, which then creates nothing. `go test`
// replays testdata/fuzz/FuzzKeyValidate.
func FuzzKeyValidate(f *testing.F) {
	f.Add("podnet", "abc123", "eth0")
	f.Add("podnet", "../../etc", "eth0")
	f.Add("..", "c", "eth0")
	f.Add("podnet", "c", "a/b")
	f.Add("podnet", "c", "a:b")
	f.Add("podnet", "c", "eth0.json")
	f.Add("podnet", "c\x00", "eth0")
	f.Add("net.-_1", "A-b.c_9", "x")
	f.Fuzz(func(t *testing.T, network, containerID, ifname string) {
		key := Key{Network: network, ContainerID: containerID, IfName: ifname}
		const dir = "/var/lib/cni/catena"
		fsys := afero.NewMemMapFs()
		s := NewDiskStore(fsys, dir, NewMemLocker())
		if err := key.Validate(); err != nil {
			checkRefused(t, s, key)
			if _, err := fsys.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("refused key %q created %s: %v", key, dir, err)
			}
			return
		}
		inside := func(what, path, parent string) {
			if filepath.Dir(path) != parent || filepath.Clean(path) != path {
				t.Fatalf("%s of %q is %s, not a plain entry of %s", what, key, path, parent)
			}
		}
		netDir := networkDirName(network)
		inside("record", s.Path(key), filepath.Join(dir, recordsDir, netDir))
		inside("network dir", filepath.Join(dir, recordsDir, netDir), filepath.Join(dir, recordsDir))
		inside("teardown note", s.pendingPath(key), filepath.Join(dir, pendingDir, netDir))
		locks := NewFlockLocker(filepath.Join(dir, "locks"))
		inside("lock", locks.lockPath(key), filepath.Join(dir, "locks", netDir))
		for _, name := range []string{netDir, filepath.Base(s.Path(key)), filepath.Base(fileutil.TempPath(s.Path(key))),
			filepath.Base(s.pendingPath(key)), filepath.Base(locks.lockPath(key)),
			quarantineName(key) + ".1234567890123456789" + recordExt, quarantineDirName(network) + ".1234567890123456789"} {
			if len(name) > nameMax {
				t.Fatalf("a file name of %q is %d bytes: %s", key, len(name), name)
			}
		}
		if err := s.Save(&Record{Key: key, Phase: PhaseAdding}); err != nil {
			t.Fatalf("save a record of %q: %v", key, err)
		}
		back, ok := s.recordKey(netDir, filepath.Base(s.Path(key)))
		if !ok || back != key {
			t.Fatalf("record name of %q lists back as %q (%v)", key, back, ok)
		}
		if strings.HasSuffix(filepath.Base(s.Path(key)), tmpExt) {
			t.Fatalf("record name of %q looks like a temp file", key)
		}
		data, err := Encode(&Record{Key: key, Phase: PhaseAdding})
		if err != nil {
			t.Fatalf("encode a record of %q: %v", key, err)
		}
		if rec, err := Decode(data); err != nil || rec.Key != key {
			t.Fatalf("a record of %q loads back as %+v, %v", key, rec, err)
		}
	})
}

// checkRefused checks that every operation on an invalid key fails without
// reporting ErrNotFound or ErrCorrupt (which would let DEL succeed or
// quarantine something).
func checkRefused(t *testing.T, s *DiskStore, key Key) {
	t.Helper()
	if _, err := s.Load(key); err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of invalid %q: %v", key, err)
	}
	if err := s.Save(&Record{Key: key, Phase: PhaseAdding}); err == nil {
		t.Fatalf("Save of invalid %q succeeded", key)
	}
	if err := s.Remove(key); err == nil {
		t.Fatalf("Remove of invalid %q succeeded", key)
	}
	if p, err := s.Quarantine(key); err == nil || p != "" {
		t.Fatalf("Quarantine of invalid %q: %q, %v", key, p, err)
	}
	if err := s.NotePending(key, PendingNote{}); err == nil {
		t.Fatalf("NotePending of invalid %q succeeded", key)
	}
	if s.Path(key) != "" {
		t.Fatalf("Path of invalid %q: %q", key, s.Path(key))
	}
	if _, err := s.TryLock(key, Holder{Verb: "ADD"}); err == nil {
		t.Fatalf("TryLock of invalid %q succeeded", key)
	}
}
