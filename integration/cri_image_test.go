package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pauseImage is the sandbox image the CRI tests build and import: no
// registry is reachable, so containerd must never try to pull it.
const pauseImage = "docker.io/catena-it/pause:local"

// repoRoot is the module root (the integration package's parent dir).
func repoRoot() string {
	_, here, _, _ := goruntime.Caller(0)
	return filepath.Dir(filepath.Dir(here))
}

// buildPauseImage builds the static pause binary of testdata/pause and packs
// it as an OCI image layout tar under dir, ready for `ctr images import`.
func buildPauseImage(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./integration/testdata/pause")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the pause binary: %s", out)
	pause, err := os.ReadFile(bin)
	require.NoError(t, err)

	layout, err := ociLayout(pause)
	require.NoError(t, err)
	path := filepath.Join(dir, "pause.tar")
	require.NoError(t, os.WriteFile(path, layout, 0o600)) // test artifact, not state
	return path
}

// blob is one content-addressed file of an OCI layout.
type blob struct {
	mediaType string
	data      []byte
}

func (b blob) digest() string {
	sum := sha256.Sum256(b.data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (b blob) descriptor() map[string]any {
	return map[string]any{"mediaType": b.mediaType, "digest": b.digest(), "size": len(b.data)}
}

// ociLayout packs the pause binary as a one-layer OCI image layout tar:
// oci-layout, index.json (naming the image with io.containerd.image.name),
// and the manifest, config and gzip layer as sha256 blobs.
func ociLayout(pause []byte) ([]byte, error) {
	rootfs, err := tarFiles(map[string][]byte{"pause": pause}, 0o755)
	if err != nil {
		return nil, fmt.Errorf("layer tar: %w", err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(rootfs); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	layer := blob{"application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes()}
	diffID := sha256.Sum256(rootfs)

	config, err := json.Marshal(map[string]any{
		"architecture": goruntime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return nil, err
	}
	cfg := blob{"application/vnd.oci.image.config.v1+json", config}

	manifestJSON, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        cfg.descriptor(),
		"layers":        []any{layer.descriptor()},
	})
	if err != nil {
		return nil, err
	}
	manifest := blob{"application/vnd.oci.image.manifest.v1+json", manifestJSON}

	desc := manifest.descriptor()
	desc["platform"] = map[string]string{"architecture": goruntime.GOARCH, "os": "linux"}
	desc["annotations"] = map[string]string{"io.containerd.image.name": pauseImage, "org.opencontainers.image.ref.name": "local"}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{desc},
	})
	if err != nil {
		return nil, err
	}

	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	for _, b := range []blob{layer, cfg, manifest} {
		files["blobs/sha256/"+b.digest()[len("sha256:"):]] = b.data
	}
	return tarFiles(files, 0o644)
}

// tarFiles writes files (parent dirs implied) into an uncompressed tar, in
// sorted order so that the same input always gives the same digest.
func tarFiles(files map[string][]byte, mode int64) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: mode, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
