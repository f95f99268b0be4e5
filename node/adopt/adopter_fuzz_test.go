package adopt

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
)

// ownedFs is an afero.MemMapFs whose files report an owner: every
// FileInfo (Stat, Lstat, a directory's listing, an open file's Stat) has a
// *syscall.Stat_t with uid, as the real disk's do, so the trust checks that
// need an owner run.
type ownedFs struct {
	afero.Fs
	uid uint32
}

var (
	_ afero.Fs      = (*ownedFs)(nil)
	_ afero.Lstater = (*ownedFs)(nil)
)

type ownedInfo struct {
	os.FileInfo
	uid uint32
}

func (o ownedInfo) Sys() any { return &syscall.Stat_t{Uid: o.uid} }

type ownedFile struct {
	afero.File
	uid uint32
}

func (f ownedFile) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return ownedInfo{fi, f.uid}, nil
}

func (f ownedFile) Readdir(n int) ([]os.FileInfo, error) {
	fis, err := f.File.Readdir(n)
	for i := range fis {
		fis[i] = ownedInfo{fis[i], f.uid}
	}
	return fis, err
}

func (o *ownedFs) Open(name string) (afero.File, error) {
	return o.OpenFile(name, os.O_RDONLY, 0)
}

func (o *ownedFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := o.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return ownedFile{f, o.uid}, nil
}

func (o *ownedFs) Stat(name string) (os.FileInfo, error) {
	fi, err := o.Fs.Stat(name)
	if err != nil {
		return nil, err
	}
	return ownedInfo{fi, o.uid}, nil
}

func (o *ownedFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := o.Stat(name)
	return fi, true, err
}

// FuzzAdoptEntry runs two passes of an Adopter over a results dir holding
// one file of arbitrary name, bytes, owner and mode (the runtime's
// results-dir entry, untrusted bytes): the listing, the trust checks, the
// read, the parse and the record build that adoption runs on the real
// dir. Nothing panics or fails; the first pass gives the file exactly one
// verdict; a record is written only for a file of Catena's uid that group
// and others cannot write, named after what it holds, and it loads back;
// the second pass settles nothing new and reports nothing.
func FuzzAdoptEntry(f *testing.F) {
	real := libcnitest.RealEntry(f)
	good := libcnitest.EncodeEntry(f, real)
	name := "k8s-pod-net-" + libcnitest.TestPod.ContainerID + "-eth0"
	euid := uint32(os.Geteuid())
	f.Add(name, good, euid, uint16(0o600))
	f.Add(name, good, uint32(65534), uint16(0o600))
	f.Add(name, good, euid, uint16(0o666))
	real["config"] = "eyJjbmlWZXJzaW9uIjoiMS4wLjAiLCJuYW1lIjoiazhzLXBvZC1uZXQiLCJwbHVnaW5zIjpbeyJ0eXBlIjoiY2F0ZW5hIiwiZGVsZWdhdGVzIjpbeyJ0eXBlIjoiYnJpZGdlIn1dfV19"
	f.Add(name, libcnitest.EncodeEntry(f, real), euid, uint16(0o600))
	f.Add("cni-loopback-"+libcnitest.TestPod.ContainerID+"-lo", good, euid, uint16(0o600))
	f.Add("k8s-pod-net-x-eth0", []byte(`{"kind":"cniCacheV1","containerId":"x","ifName":"eth0","networkName":"k8s-pod-net","result":{}}`), euid, uint16(0o644))
	f.Add("k8s-pod-net-junk-eth0", []byte("{not json"), euid, uint16(0o600))
	f.Fuzz(func(t *testing.T, name string, data []byte, uid uint32, perm uint16) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || filepath.Clean(name) != name {
			return
		}
		mem := afero.NewMemMapFs()
		path := "/results/" + name
		require.NoError(t, afero.WriteFile(mem, path, data, 0o600))
		require.NoError(t, mem.Chmod(path, os.FileMode(perm)&os.ModePerm))
		store := cache.NewDiskStore(afero.NewMemMapFs(), "/catena", cache.NewMemLocker())
		a, err := New(Options{ResultsDir: "/results", FS: &ownedFs{Fs: mem, uid: uid}, Store: store,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)

		rep, err := a.Adopt(context.Background(), []byte(libcnitest.PrimaryConf))
		require.NoError(t, err)
		verdicts := rep.Adopted + rep.AlreadyPresent + len(rep.Skipped) + len(rep.Refused)
		require.Equal(t, 1, verdicts, "%+v", rep)
		trusted := uid == euid && perm&0o022 == 0
		if !trusted && strings.HasPrefix(name, "k8s-pod-net-") && len(rep.Skipped) == 0 {
			require.Len(t, rep.Refused, 1, "an untrusted entry passed: %+v", rep)
		}
		keys, err := store.List()
		require.NoError(t, err)
		require.Len(t, keys, rep.Adopted)
		for _, k := range keys {
			require.True(t, trusted, "adopted an entry of uid %d, mode %#o", uid, perm)
			require.NoError(t, k.Validate())
			require.Equal(t, name, k.Network+"-"+k.ContainerID+"-"+k.IfName)
			rec, err := store.Load(k)
			require.NoError(t, err)
			require.NotEmpty(t, rec.Steps)
			require.NotEmpty(t, rec.Result)
		}

		again, err := a.Adopt(context.Background(), []byte(libcnitest.PrimaryConf))
		require.NoError(t, err)
		require.Equal(t, Report{}, again, "a settled entry reported again")
	})
}
