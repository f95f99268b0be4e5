package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestImagePortmapTeardown runs portmap's DEL as catena-agent's reconciler
// runs it on a node: from the agent's image (make image's archive, unpacked
// and entered with chroot, the image's PATH, the node's /opt/cni/bin
// mounted), in the host's network namespace. The pod's ADD ran on the host
// and made DNAT rules; the DEL from the image must remove them and succeed.
// (Without iptables in the image it failed: "neither iptables nor
// ip6tables is usable", the rules stayed and the attachment was held.)
func TestImagePortmapTeardown(t *testing.T) {
	root, env := unpackImage(t, catenaImageArchive(t))
	// what the runtime and the manifest give the agent's container
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	require.NoError(t, syscall.Mknod(filepath.Join(root, "dev", "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "opt", "cni", "bin"), 0o755))
	copyExecutable(t, filepath.Join(cniPath, "portmap"), filepath.Join(root, "opt", "cni", "bin", "portmap"))

	w := newWorld(t)
	const net = "itimage"
	list := w.plainList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate)
	container := w.id + "-c"
	port := int(hostPort())
	rt := w.rt(container, portMapping(port))
	res, err := w.cni.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, rt) })
	before := iptablesMentions(t, container)
	require.Positive(t, before, "portmap's ADD on the host made rules naming the container")

	// the DEL config libcni gives portmap: its own, the runtime config of
	// its capability, and the chain's result as prevResult
	prev, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal([]byte(portmapDelegate), &conf))
	conf["cniVersion"], conf["name"], conf["prevResult"] = "1.1.0", net, prev
	conf["runtimeConfig"] = portMapping(port)
	stdin, err := json.Marshal(conf)
	require.NoError(t, err)

	cmd := exec.Command("/opt/cni/bin/portmap")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(env, "CNI_COMMAND=DEL", "CNI_CONTAINERID="+container, "CNI_NETNS="+w.netns,
		"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin")
	out, delErr := cmd.CombinedOutput()
	after := iptablesMentions(t, container)
	fmt.Printf("image portmap teardown: image PATH %q; portmap DEL from the image: err %v %s; iptables lines naming the pod: %d before, %d after\n",
		env, delErr, strings.TrimSpace(string(out)), before, after)
	assert.NoError(t, delErr, "portmap's DEL from the image: %s", out)
	assert.Zero(t, after, "its DNAT rules are gone")
}

// unpackImage unpacks the one image of an OCI archive (make image's) into
// a temp dir, its layers in order, and returns the dir and the image's
// environment (its config's Env; containerd's default PATH when it sets
// none, as containerd does for a container).
func unpackImage(t *testing.T, archive string) (string, []string) {
	t.Helper()
	blobs := readOCIArchive(t, archive)
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(blobs["index.json"], &index))
	require.Len(t, index.Manifests, 1, "one image in %s", archive)
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
		Layers []struct {
			MediaType, Digest string
		} `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(layoutBlob(t, blobs, index.Manifests[0].Digest), &manifest))
	var config struct {
		Config struct{ Env []string } `json:"config"`
	}
	require.NoError(t, json.Unmarshal(layoutBlob(t, blobs, manifest.Config.Digest), &config))

	root := t.TempDir()
	for _, l := range manifest.Layers {
		var r io.Reader = bytes.NewReader(layoutBlob(t, blobs, l.Digest))
		if strings.HasSuffix(l.MediaType, "gzip") {
			zr, err := gzip.NewReader(r)
			require.NoError(t, err)
			r = zr
		}
		require.NoError(t, untar(r, root), "layer %s", l.Digest)
	}
	env := config.Config.Env
	if !strings.Contains(strings.Join(env, "\n"), "PATH=") {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return root, env
}

// readOCIArchive reads an OCI archive's files by name (index.json,
// blobs/sha256/<hex>).
func readOCIArchive(t *testing.T, archive string) map[string][]byte {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		if hdr.Typeflag == tar.TypeReg {
			raw, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[filepath.Clean(hdr.Name)] = raw
		}
	}
}

func layoutBlob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	alg, hex, ok := strings.Cut(digest, ":")
	require.True(t, ok, "digest %q", digest)
	raw, ok := blobs[filepath.Join("blobs", alg, hex)]
	require.True(t, ok, "blob %s in the archive", digest)
	return raw
}

// untar extracts a layer's dirs, files, symlinks and hard links under
// root, each name cleaned as if root were / (the archive is make image's
// own: its symlinks are not resolved against root).
func untar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + hdr.Name)
		path := filepath.Join(root, name)
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, mode|0o700)
		case tar.TypeReg:
			err = writeLayerFile(path, tr, mode)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Symlink(hdr.Linkname, path)
			}
		case tar.TypeLink:
			err = os.Link(filepath.Join(root, filepath.Clean("/"+hdr.Linkname)), path)
		default:
			err = fmt.Errorf("%s: tar type %c not handled", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeLayerFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
