package integration

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/release"
)

// ociBlobs reads index.json and every blob of the OCI archive at path.
func ociBlobs(t *testing.T, path string) (index []byte, blobs map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	blobs = map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		name := strings.TrimPrefix(h.Name, "./")
		if name != "index.json" && !strings.HasPrefix(name, "blobs/sha256/") {
			continue
		}
		if h.Size > 64<<10 { // the layer: not needed
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		if name == "index.json" {
			index = b
		} else {
			blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")] = b
		}
	}
	require.NotNil(t, index, "%s has no index.json", path)
	return index, blobs
}

// TestImageLabels: the image make image built says its version (the
// release's), the commit it was built from, its licence and its source,
// as config labels and as manifest annotations.
func TestImageLabels(t *testing.T) {
	index, blobs := ociBlobs(t, catenaImageArchive(t))
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(index, &idx))
	require.Len(t, idx.Manifests, 1)
	var man struct {
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Annotations map[string]string `json:"annotations"`
	}
	require.NoError(t, json.Unmarshal(blobs[idx.Manifests[0].Digest], &man), "the manifest")
	var cfg struct {
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(blobs[man.Config.Digest], &cfg), "the config")

	head := "unknown"
	if out, err := exec.Command("git", "-C", repoRoot(), "rev-parse", "HEAD").Output(); err == nil {
		head = strings.TrimSpace(string(out))
	}
	for where, m := range map[string]map[string]string{"config label": cfg.Config.Labels, "manifest annotation": man.Annotations} {
		assert.Equal(t, release.Version, m["org.opencontainers.image.version"], where)
		assert.Equal(t, "Apache-2.0", m["org.opencontainers.image.licenses"], where)
		assert.Equal(t, "catena", m["org.opencontainers.image.title"], where)
		assert.NotEmpty(t, m["org.opencontainers.image.source"], where)
		assert.NotEmpty(t, m["org.opencontainers.image.created"], where)
		rev := m["org.opencontainers.image.revision"]
		if head != "unknown" {
			assert.Equal(t, head, strings.TrimSuffix(rev, "-dirty"), "%s: the image is of this checkout's commit (make image after the last commit)", where)
		}
	}
	t.Logf("image %s, revision %s, licence %s", man.Annotations["org.opencontainers.image.version"],
		man.Annotations["org.opencontainers.image.revision"], man.Annotations["org.opencontainers.image.licenses"])
}
