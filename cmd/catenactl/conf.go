package main

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// maxFileSize bounds what catenactl reads of a config or valid-list file.
const maxFileSize = 1 << 20

// findConfFile returns the first network config file of dir, in lexical
// order as runtimes pick them, that has a catena entry (a .conf of type
// catena or a .conflist with a catena plugin). A file that does not parse is
// passed over, as a runtime would.
func findConfFile(dir string) (string, error) {
	files, err := libcni.ConfFiles(dir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return "", fmt.Errorf("looking for a catena config in %s: %w", dir, err)
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := readSmallFile(f)
		if err != nil {
			continue
		}
		if hasCatenaEntry(data) {
			return f, nil
		}
	}
	return "", fmt.Errorf("no network config with a catena entry in %s: pass --conf", dir)
}

// hasCatenaEntry reports whether data is a plugin config of type catena or
// a conflist with a catena plugin.
func hasCatenaEntry(data []byte) bool {
	type typed struct {
		Type string `json:"type"`
	}
	var head struct {
		typed
		Plugins []typed `json:"plugins"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	if head.Plugins == nil {
		return head.Type == "catena"
	}
	return slices.Contains(head.Plugins, typed{Type: "catena"})
}

// readSmallFile reads a regular file of at most maxFileSize bytes, without
// following a final symlink or blocking on a FIFO.
func readSmallFile(path string) ([]byte, error) {
	return fileutil.ReadSmallFile(afero.NewOsFs(), path, maxFileSize, true)
}
