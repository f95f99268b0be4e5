package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/node/nodeconf"
)

const netDirCheckName = "network dir"

// networkDirCheck reports what doctor sees in the network's plugin dir,
// <dir of the config>/<network>/*.conf, which libcni v1.3 (containerd 2.1
// and later, CRI-O 1.33 and later) appends to a conflist's plugins unless
// it sets loadOnlyInlinedPlugins. Without the dir there is no check.
func networkDirCheck(confPath, network string) (check, bool) {
	confDir := filepath.Dir(confPath)
	dir := nodeconf.NetworkDir(confDir, network)
	if dir == "" {
		return check{}, false
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return check{}, false
	case err != nil:
		return problem(netDirCheckName, err.Error(), "check the path and its permissions"), true
	case !fi.IsDir():
		return check{}, false
	}
	plugins, err := nodeconf.ReadNetworkDir(afero.NewOsFs(), confDir, network)
	if err != nil {
		return problem(netDirCheckName, fmt.Sprintf("%s: %v", dir, err),
			"fix or remove the file: a runtime with libcni v1.3 fails to load (containerd) or skips (CRI-O) a conflist of this network that does not set loadOnlyInlinedPlugins, and catena-agent refuses to wrap it"), true
	}
	items := make([]string, len(plugins))
	for n, p := range plugins {
		items[n] = fmt.Sprintf("%s (%s)", p.File, p.Type)
	}
	c := netDirVerdict(confPath, dir, plugins)
	c.Items = items
	return c, true
}

// netDirVerdict judges the dir's plugins against the config at confPath.
func netDirVerdict(confPath, dir string, plugins []nodeconf.DirPlugin) check {
	if !strings.HasSuffix(confPath, ".conflist") {
		return ok(netDirCheckName, fmt.Sprintf("%s: %d plugin file(s), not read: %s is a single plugin config", dir, len(plugins), filepath.Base(confPath)))
	}
	data, err := readSmallFile(confPath)
	if err != nil {
		return problem(netDirCheckName, err.Error(), "check the config file")
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		return problem(netDirCheckName, err.Error(), "fix the config file")
	}
	gen, generated := nodeconf.ReadGenerated(data)
	switch {
	case !list.LoadOnlyInlinedPlugins && len(plugins) > 0:
		return problem(netDirCheckName,
			fmt.Sprintf("%s: a runtime with libcni v1.3 (containerd 2.1 and later, CRI-O 1.33 and later) runs these %d plugin(s) after catena, outside its records (no rollback, no retried DEL)", dir, len(plugins)),
			"let catena-agent wrap them (it sets loadOnlyInlinedPlugins), or move them into catena's delegates and set \"loadOnlyInlinedPlugins\": true")
	case !list.LoadOnlyInlinedPlugins:
		return ok(netDirCheckName, dir+": no plugin files")
	case !generated:
		return ok(netDirCheckName, fmt.Sprintf("%s: %d plugin file(s), not read: the config sets loadOnlyInlinedPlugins", dir, len(plugins)))
	case gen.WrapsNetworkDir(plugins) && len(plugins) > 0:
		return ok(netDirCheckName, fmt.Sprintf("%s: %d plugin file(s), wrapped by catena-agent as %s; loadOnlyInlinedPlugins keeps the runtime from running them again",
			dir, len(plugins), delegateRange(data, len(plugins))))
	case len(gen.NetworkDir) == 0:
		return ok(netDirCheckName, fmt.Sprintf("%s: %d plugin file(s), not wrapped: %s", dir, len(plugins), whyNotWrapped(filepath.Dir(confPath), gen.Source)))
	}
	return problem(netDirCheckName,
		fmt.Sprintf("%s: changed since catena-agent wrapped them (%d file(s) then, %d now): catena runs what it wrapped, the primary alone would run what is there now", dir, len(gen.NetworkDir), len(plugins)),
		"check that catena-agent runs and is ready (its /readyz names what it refuses)")
}

// delegateRange names the catena delegates that came from the dir, the
// last n of the generated file's catena entry (0-based, as doctor's
// delegate checks name them).
func delegateRange(data []byte, n int) string {
	conf, err := libchain.CatenaConf(data)
	if err != nil || len(conf.Delegates) < n {
		return "delegates"
	}
	first, last := len(conf.Delegates)-n, len(conf.Delegates)-1
	if first == last {
		return fmt.Sprintf("delegate %d", first)
	}
	return fmt.Sprintf("delegates %d-%d", first, last)
}

// whyNotWrapped says why catena-agent wrapped none of the dir's plugins for
// the primary source: the primary does not have the runtime read them, or
// the agent was told the runtime reads no network dir.
func whyNotWrapped(confDir, source string) string {
	const either = "the primary %s does not have the runtime read them (loadOnlyInlinedPlugins, or a .conf primary), or catena-agent runs with --network-dir-plugins=ignore"
	if source == "" || source != filepath.Base(source) {
		return fmt.Sprintf(either, "(unnamed)")
	}
	data, err := readSmallFile(filepath.Join(confDir, source))
	if err != nil || !strings.HasSuffix(source, ".conflist") {
		return fmt.Sprintf(either, source)
	}
	list, err := libcni.NetworkConfFromBytes(data)
	switch {
	case err != nil:
		return fmt.Sprintf(either, source)
	case list.LoadOnlyInlinedPlugins:
		return fmt.Sprintf("the primary %s sets loadOnlyInlinedPlugins: the runtime does not read them", source)
	}
	return fmt.Sprintf("catena-agent runs with --network-dir-plugins=ignore (right for containerd 2.0 and earlier, CRI-O 1.32 and earlier, which never read the dir; with a newer runtime the primary %s alone ran them, and they no longer run)", source)
}
