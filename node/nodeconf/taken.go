package nodeconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"
)

// CiliumBackup is the suffix Cilium's agent gives every other config file
// of the conf dir when cni.exclusive is true (its default): its
// cleanupOtherCNI renames them to <name>.cilium_bak at start and again on
// every change in the dir, so the runtime loads only Cilium's conflist.
const CiliumBackup = ".cilium_bak"

// Who took the generated file away, as the metric's label says it.
const (
	TakenByCilium = "cilium"
	TakenByOther  = "other"
)

// Taken says what happened to a generated file that is no longer in place:
// renamed away by Cilium's exclusive mode, or removed or changed by
// another writer. Its Error is the reason readiness and the log give, with
// the fix.
type Taken struct {
	// File is the generated file's path.
	File string
	// Backup is the path of File's .cilium_bak if it carries catena-agent's
	// generated key; "" if there is none.
	Backup string
	// Cilium is Cilium's config file in the conf dir (a 05-cilium* file or
	// one whose plugin is cilium-cni); "" if there is none.
	Cilium string
}

// By is the metric's label: cilium when the generated file's .cilium_bak
// and Cilium's own config are both in the conf dir, other otherwise.
func (t Taken) By() string {
	if t.Backup != "" && t.Cilium != "" {
		return TakenByCilium
	}
	return TakenByOther
}

func (t Taken) Error() string {
	if t.By() == TakenByCilium {
		return fmt.Sprintf("%s was renamed to %s by Cilium's exclusive mode (cni.exclusive: true, Cilium's default; its %s is in the conf dir): "+
			"the runtime loads Cilium's config and pods bypass Catena; fix: set cni.exclusive: false in Cilium's Helm values "+
			"(cni-exclusive: \"false\" in the cilium-config ConfigMap) and restart the Cilium agents; in Cilium's chaining mode too, which renames the other files alike while cni-exclusive is true",
			t.File, filepath.Base(t.Backup), filepath.Base(t.Cilium))
	}
	return fmt.Sprintf("%s was removed or changed by another writer after catena-agent wrote it: another CNI's agent or installer "+
		"manages the conf dir (Cilium with cni.exclusive renames it to %s); fix: stop that writer from touching it",
		t.File, filepath.Base(t.File)+CiliumBackup)
}

// WhoTook looks in dir for the traces of what took the generated file name
// away: its .cilium_bak with catena-agent's generated key, and Cilium's config.
func WhoTook(fsys afero.Fs, dir, name string) (Taken, error) {
	t := Taken{File: filepath.Join(dir, name)}
	backup := t.File + CiliumBackup
	data, err := readRegular(fsys, backup, maxConfSize)
	switch {
	case err == nil:
		if _, ok := ReadGenerated(data); ok {
			t.Backup = backup
		}
	case !errors.Is(err, fs.ErrNotExist):
		return t, fmt.Errorf("reading %s: %w", backup, err)
	}
	files, err := ConfFiles(fsys, dir)
	if err != nil {
		return t, err
	}
	for _, f := range files {
		if f == name {
			continue
		}
		if isCilium(fsys, filepath.Join(dir, f)) {
			t.Cilium = filepath.Join(dir, f)
			break
		}
	}
	return t, nil
}

// isCilium: the file is Cilium's config, by its name (05-cilium.conflist,
// and 05-cilium.conf before 1.13) or by a plugin of type cilium-cni (its
// chaining modes and custom configs). A file that cannot be read or parsed
// is not.
func isCilium(fsys afero.Fs, path string) bool {
	if strings.HasPrefix(filepath.Base(path), "05-cilium") {
		return true
	}
	data, err := readRegular(fsys, path, maxConfSize)
	if err != nil {
		return false
	}
	var conf struct {
		Type    string `json:"type"`
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if json.Unmarshal(data, &conf) != nil {
		return false
	}
	if conf.Type == ciliumPlugin {
		return true
	}
	for _, p := range conf.Plugins {
		if p.Type == ciliumPlugin {
			return true
		}
	}
	return false
}

// ciliumPlugin is Cilium's CNI plugin binary.
const ciliumPlugin = "cilium-cni"
