package cache

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// FuzzPendingFromDisk reads a pending-teardown marker back through the
// store, as a later ADD does: a marker of any name and content (what
// anyone who can write the cache dir, or a torn write, leaves) under
// pending/podnet, next to a record of the attachment or not. PendingTeardown
// never panics nor fails on it; what it returns names only attachments of
// the network whose marker name is theirs (a hashed name only if a record
// hashes back to it), with the note the content parses to or, for content
// it refuses, due at once with Bad set. A marker the store rewrites then
// reads back as written. `go test` replays testdata/fuzz/FuzzPendingFromDisk.
func FuzzPendingFromDisk(f *testing.F) {
	f.Add("c1", "eth0", "", []byte("v1 1795464253000000000 3\n"), false)
	f.Add("c1", "eth0", "", []byte("v1 1795464253000000000 3\nv1 0 0\n"), true)
	f.Add(strings.Repeat("a", 300), "eth0", "", []byte("v1 0 1\n"), true)
	f.Add(strings.Repeat("b", 300), "eth0", "", []byte(strings.Repeat("v1 0 1", 20)), false)
	f.Add("", "", "h-"+strings.Repeat("0", 64), []byte(""), false)
	f.Add("", "", "c1:eth0:x", []byte("v1 1 1"), false)
	f.Add("", "", ".c1:eth0.tmp", []byte("\x00v1 1 1\n"), false)
	f.Fuzz(func(t *testing.T, cid, ifname, rawName string, content []byte, withRecord bool) {
		key := Key{Network: "podnet", ContainerID: cid, IfName: ifname}
		name := rawName
		if key.Validate() == nil {
			name = keyName(key)
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > nameMax {
			t.Skip("not a file name")
		}
		s := NewDiskStore(afero.NewMemMapFs(), "/cache", NewMemLocker())
		if withRecord && key.Validate() == nil {
			if err := s.Save(sampleRecord(key)); err != nil {
				t.Fatalf("saving the record of %s: %v", key, err)
			}
		}
		path := filepath.Join("/cache", pendingDir, "podnet", name)
		if err := afero.WriteFile(s.fs, path, content, filePerm); err != nil {
			t.Fatalf("planting %s: %v", path, err)
		}
		got, err := s.PendingTeardown("podnet", 10)
		if err != nil {
			t.Fatalf("marker %q (%q): %v", name, content, err)
		}
		if len(got) > 1 {
			t.Fatalf("one marker read as %d: %+v", len(got), got)
		}
		for _, p := range got {
			if p.Key.Network != "podnet" || !namesKey(p.Key, "podnet", name) {
				t.Fatalf("marker %q read as %s, whose files are not named so", name, p.Key)
			}
			if isHashedName(name) && !withRecord {
				t.Fatalf("hashed marker %q read as %s with no record behind it", name, p.Key)
			}
			want, perr := ParseNote(content[:min(len(content), maxNoteSize+1)])
			if p.Note != want || (perr == nil) != (p.Bad == nil) {
				t.Fatalf("marker %q: %+v (bad %v), the parser says %+v (%v)", content, p.Note, p.Bad, want, perr)
			}
			note := PendingNote{Due: want.Due.Add(1), Attempts: 2}
			if err := s.NotePending(p.Key, note); err != nil {
				t.Fatalf("re-noting %s: %v", p.Key, err)
			}
			again, err := s.PendingTeardown("podnet", 10)
			if err != nil || !slices.Equal(again, []Pending{{Key: p.Key, Note: note}}) {
				t.Fatalf("re-noted %+v, read back %+v (%v)", note, again, err)
			}
		}
		if len(got) == 0 && key.Validate() == nil && (!isHashedName(name) || withRecord) {
			t.Fatalf("marker %q of %s was not read", name, key)
		}
	})
}
