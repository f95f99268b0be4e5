package adopt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain/libcnientry"
)

// candidate is a cache file that may belong to the network: libcni names it
// <network>-<containerID>-<ifname>.
type candidate struct {
	name string
	info os.FileInfo
}

// scan lists the results dir and returns the files of the network not
// settled yet, sorted; every other file not settled yet is skipped or
// refused (and settled). Settled files that are gone are forgotten. A
// missing dir holds nothing; an untrusted one is an error.
func (p *pass) scan() ([]candidate, error) {
	dir := p.opts.ResultsDir
	infos, err := afero.ReadDir(p.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(p.settled)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the libcni cache %s: %w", dir, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	listed := make(map[string]bool, len(infos))
	var out []candidate
	for _, fi := range infos {
		name := fi.Name()
		listed[name] = true
		id := libcnientry.IDOf(fi)
		if old, ok := p.settled[name]; ok && old == id {
			continue
		}
		if !strings.HasPrefix(name, p.network+"-") {
			p.settle(name, id)
			p.skip(name, errors.New("not of network "+p.network), true)
			continue
		}
		if err := libcnientry.Vet(filepath.Join(dir, name), fi); err != nil {
			p.settle(name, id)
			if errors.Is(err, fileutil.ErrUntrusted) {
				p.refuse(name, err)
			} else {
				p.skip(name, err, false)
			}
			continue
		}
		out = append(out, candidate{name: name, info: fi})
	}
	for name := range p.settled {
		if !listed[name] {
			delete(p.settled, name)
		}
	}
	return out, nil
}
