package libchain

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// maxConfSize bounds what LoadConfFile reads.
const maxConfSize = 1 << 20

// LoadConfFile reads Catena's config from a network config file, for tools
// such as catenactl: either a single plugin config (.conf) whose type is
// catena, or a conflist (.conflist) with a catena entry, which inherits the
// list's name and cniVersion as a runtime would pass them.
func LoadConfFile(path string) (*NetConf, error) {
	data, err := fileutil.ReadSmallFile(afero.NewOsFs(), path, maxConfSize, true)
	if err != nil {
		return nil, fmt.Errorf("read network config: %w", err)
	}
	conf, err := CatenaConf(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return conf, nil
}

// CatenaConf parses Catena's config out of a plugin config or a conflist;
// a conflist's catena entry inherits the list's name and the cniVersion
// libcni picks for it (the highest it supports of cniVersion and
// cniVersions).
func CatenaConf(data []byte) (*NetConf, error) {
	var head struct {
		Name       string            `json:"name"`
		CNIVersion string            `json:"cniVersion"`
		Type       string            `json:"type"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a network config: %w", err)
	}
	if head.Plugins == nil {
		if head.Type != "catena" {
			return nil, fmt.Errorf("type is %q, not catena", head.Type)
		}
		return ParseConfig(data)
	}
	// The list's version as libcni v1.3 picks it: the highest it supports
	// of cniVersion and cniVersions.
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("not a network config list: %w", err)
	}
	head.CNIVersion = list.CNIVersion
	for i, p := range head.Plugins {
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(p, &entry); err != nil {
			return nil, fmt.Errorf("plugins[%d]: not a JSON object", i)
		}
		var typ string
		if t, ok := entry["type"]; !ok || json.Unmarshal(t, &typ) != nil || typ != "catena" {
			continue
		}
		var err error
		if entry["name"], err = json.Marshal(head.Name); err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		if entry["cniVersion"], err = json.Marshal(head.CNIVersion); err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		inj, err := json.Marshal(entry)
		if err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		return ParseConfig(inj)
	}
	return nil, fmt.Errorf("conflist %q has no catena entry", head.Name)
}
