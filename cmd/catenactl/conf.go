package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/containernetworking/cni/libcni"
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
// following a final symlink.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, errors.New(path + " is larger than 1 MiB")
	}
	return data, nil
}
