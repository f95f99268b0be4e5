package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layer is a set of directories of the module, by prefix: "libchain"
// covers libchain and everything under it, so a package created under it
// later is checked from the day it lands.
type layer struct {
	name     string
	rank     int
	prefixes []string
}

// layers is the table, lowest rank first. A package imports only packages
// of its own rank or a lower one.
var layers = []layer{
	{name: "files", rank: 0, prefixes: []string{"fileutil"}},
	{name: "record store", rank: 1, prefixes: []string{"cache"}},
	{name: "manifests", rank: 1, prefixes: []string{"deploy"}},
	{name: "engine", rank: 2, prefixes: []string{"libchain"}},
	{name: "node", rank: 3, prefixes: []string{"node"}},
	// Test helpers may use the store, the engine and node/, and only tests
	// import them (rule testOnly).
	{name: "test helpers", rank: 3, prefixes: []string{"internal", "integration"}},
	{name: "binaries", rank: 4, prefixes: []string{"cmd", "plugins", "tools"}},
}

// testOnly are the prefixes of the test helpers: only tests and other test
// helpers import them.
var testOnly = []string{"internal", "integration"}

func isTestHelper(rel string) bool {
	for _, t := range testOnly {
		if under(rel, t) {
			return true
		}
	}
	return false
}

// linkLimit bounds what a binary links, transitively: the packages under
// prefix depend on no package of the module above maxRank and on none under
// a banned prefix (outside the module), but as via allows.
type linkLimit struct {
	prefix  string
	maxRank int
	banned  []string
	// via names, for a banned prefix, the one package outside it through
	// which the binary may link packages under it: such a package is
	// allowed when every package of the binary that imports it is that
	// one or under the banned prefix itself.
	via map[string]string
	why string
}

var linkLimits = []linkLimit{{
	prefix:  "plugins",
	maxRank: 2,
	banned:  []string{"k8s.io/client-go"},
	why:     "a CNI binary links only the store and the engine, never node/ nor client-go",
}, {
	// CNI's pkg/invoke imports OpenTelemetry's API (trace, propagation,
	// baggage) for libcni's own RawExec, which catena never runs; catena
	// reads and passes on the trace context itself (libchain/tracectx).
	// Nothing else may bring OpenTelemetry in: not the module's code, not
	// another dependency, and so never its SDK or an exporter.
	prefix:  "plugins",
	maxRank: 3, // the layers alone
	banned:  []string{"go.opentelemetry.io"},
	via:     map[string]string{"go.opentelemetry.io": "github.com/containernetworking/cni/pkg/invoke"},
	why:     "a CNI binary carries the trace context itself and links no OpenTelemetry package but those CNI's pkg/invoke imports",
}}

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// graph is the module's packages by path relative to the module ("cache",
// "node/metrics"), and the imports of every package they depend on.
type graph struct {
	module  string
	pkgs    map[string]*pkg
	imports map[string][]string
}

// chain returns a shortest import chain from one package to the nearest
// package that match accepts, the module's packages named relative to it;
// just the importer's name when the graph knows no such chain.
func (g graph) chain(from string, match func(string) bool) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != from && match(cur) {
			var names []string
			for ; cur != ""; cur = prev[cur] {
				names = append([]string{g.name(cur)}, names...)
			}
			return strings.Join(names, " -> ")
		}
		for _, next := range g.imports[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return g.name(from)
}

// name returns path relative to the module when it is in the module.
func (g graph) name(path string) string {
	if r, ok := g.rel(path); ok {
		return r
	}
	return path
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// layerOf returns the layer of the longest prefix covering rel.
func layerOf(rel string) (layer, bool) {
	var best layer
	n := -1
	for _, l := range layers {
		for _, p := range l.prefixes {
			if under(rel, p) && len(p) > n {
				best, n = l, len(p)
			}
		}
	}
	return best, n >= 0
}

// rel returns path relative to the module, or false for a path outside it.
func (g graph) rel(path string) (string, bool) {
	if path == g.module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, g.module+"/")
	return r, ok
}

// importer names the file of p that imports path, or p itself when its
// files cannot be read (a synthetic graph).
func importer(rel string, p *pkg, path string) string {
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		if p.Dir == "" {
			break
		}
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, imp := range f.Imports {
			if v, err := strconv.Unquote(imp.Path.Value); err == nil && v == path {
				return rel + "/" + name
			}
		}
	}
	return rel
}

// check returns every broken rule of g, one line each, sorted.
func check(g graph) []string {
	var out []string
	rels := make([]string, 0, len(g.pkgs))
	for rel := range g.pkgs {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		p := g.pkgs[rel]
		from, ok := layerOf(rel)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no layer covers it: give it one in internal/layers/layers_test.go", rel))
			continue
		}
		for _, imp := range p.Imports {
			to, inModule := g.rel(imp)
			if !inModule {
				continue
			}
			if l, ok := layerOf(to); ok && l.rank > from.rank {
				out = append(out, fmt.Sprintf("%s imports %s: layer %q (%d) imports from the higher layer %q (%d)",
					importer(rel, p, imp), to, from.name, from.rank, l.name, l.rank))
			}
			for _, t := range testOnly {
				if under(to, t) && !isTestHelper(rel) {
					out = append(out, fmt.Sprintf("%s imports %s: packages under %s/ are test helpers, imported only by tests",
						importer(rel, p, imp), to, t))
				}
			}
		}
		for _, lim := range linkLimits {
			if !under(rel, lim.prefix) {
				continue
			}
			banned := map[string][]string{}
			linked := map[string]bool{p.ImportPath: true}
			for _, dep := range p.Deps {
				linked[dep] = true
			}
			for _, dep := range p.Deps {
				if to, inModule := g.rel(dep); inModule {
					if l, ok := layerOf(to); ok && l.rank > lim.maxRank {
						out = append(out, fmt.Sprintf("%s links %s (layer %q) through %s: %s",
							rel, to, l.name, g.chain(p.ImportPath, func(s string) bool { return s == dep }), lim.why))
					}
					continue
				}
				for _, b := range lim.banned {
					if under(dep, b) && !g.onlyVia(dep, b, lim.via[b], linked) {
						banned[b] = append(banned[b], dep)
					}
				}
			}
			for _, b := range lim.banned {
				deps := banned[b]
				if len(deps) == 0 {
					continue
				}
				what := b
				if v := lim.via[b]; v != "" {
					what += " not through " + v
				}
				out = append(out, fmt.Sprintf("%s links %d package(s) of %s, through %s: %s",
					rel, len(deps), what, g.chain(p.ImportPath, func(s string) bool { return slices.Contains(deps, s) }), lim.why))
			}
		}
	}
	return out
}

// onlyVia reports whether every package of linked that imports dep is via
// or under banned; false when via is "".
func (g graph) onlyVia(dep, banned, via string, linked map[string]bool) bool {
	if via == "" {
		return false
	}
	for from := range linked {
		if slices.Contains(g.imports[from], dep) && from != via && !under(from, banned) {
			return false
		}
	}
	return true
}

// load lists the module's packages with go list, built with tags.
func load(t *testing.T, tags string) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs go list")
	gomod, err := exec.Command(goBin, "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	root := filepath.Dir(strings.TrimSpace(string(gomod)))

	cmd := exec.Command(goBin, "list", "-deps", "-tags="+tags, "-json=ImportPath,Dir,GoFiles,Imports,Deps,Module,DepOnly", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -tags=%q ./...: %s", tags, stderr.String())

	g := graph{pkgs: map[string]*pkg{}, imports: map[string][]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			pkg
			Module  struct{ Path string }
			DepOnly bool
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "decoding go list's output")
		g.imports[p.ImportPath] = p.Imports
		// -deps lists the standard library and the dependencies too, as
		// DepOnly: ./... matched the module's own packages only.
		if !p.DepOnly {
			require.NotEmpty(t, p.Module.Path, "%s: no module", p.ImportPath)
			g.module = p.Module.Path
			rel, ok := g.rel(p.ImportPath)
			require.True(t, ok, "%s is outside the module %s", p.ImportPath, g.module)
			g.pkgs[rel] = &p.pkg
		}
	}
	return g
}

func TestImportsPointDown(t *testing.T) {
	for _, tags := range []string{"", "failpoint"} {
		t.Run("tags="+tags, func(t *testing.T) {
			g := load(t, tags)
			// go list found the module, not an empty tree
			for _, rel := range []string{"fileutil", "cache", "libchain", "node/agent", "plugins/catena", "cmd/catena-agent"} {
				require.Contains(t, g.pkgs, rel)
			}
			for _, v := range check(g) {
				t.Error(v)
			}
			if t.Failed() {
				t.Log("the layers and their rules: internal/layers/doc.go")
			}
		})
	}
}

// TestCheckFindsEveryBrokenRule runs check over small made-up graphs, among
// them packages that do not exist yet: the prefixes cover them.
func TestCheckFindsEveryBrokenRule(t *testing.T) {
	const m = "example.com/m"
	type edge struct {
		imports []string
		deps    []string
	}
	// imports of packages outside the graph's pkgs: the chains go through them
	others := map[string][]string{
		m + "/libchain": {m + "/cache", m + "/node/metrics"},
	}
	const (
		cniInvoke = "github.com/containernetworking/cni/pkg/invoke"
		otelTrace = "go.opentelemetry.io/otel/trace"
		otelProp  = "go.opentelemetry.io/otel/propagation"
		otelSDK   = "go.opentelemetry.io/otel/sdk/trace"
	)
	// what CNI's pkg/invoke and OpenTelemetry import
	outside := map[string][]string{
		cniInvoke: {otelTrace, otelProp},
		otelProp:  {otelTrace},
		otelSDK:   {otelTrace},
	}
	const otelWhy = "a CNI binary carries the trace context itself and links no OpenTelemetry package but those CNI's pkg/invoke imports"
	tests := []struct {
		name string
		pkgs map[string]edge
		want []string
	}{{
		name: "imports that point down",
		pkgs: map[string]edge{
			"fileutil":               {},
			"cache":                  {imports: []string{m + "/fileutil"}},
			"cache/faultfs":          {imports: []string{m + "/cache"}},
			"libchain":               {imports: []string{m + "/cache"}},
			"libchain/invoke":        {imports: []string{m + "/libchain", m + "/cache"}},
			"node/adopt":             {imports: []string{m + "/libchain/libcnientry", m + "/node/nodeconf"}},
			"cmd/catena-agent":       {imports: []string{m + "/node/adopt", m + "/cmd/internal/cli"}, deps: []string{"k8s.io/client-go/kubernetes"}},
			"plugins/catena":         {imports: []string{m + "/libchain/libcnientry"}, deps: []string{m + "/libchain/libcnientry", m + "/libchain", m + "/cache"}},
			"plugins/testing/noop":   {deps: []string{"github.com/containernetworking/cni/pkg/skel"}},
			"internal/retriertest":   {imports: []string{m + "/libchain", m + "/integration/fixture"}},
			"integration/fixture":    {},
			"libchain/libcnientry":   {imports: []string{m + "/libchain/events"}},
			"libchain/events":        {imports: []string{m + "/fileutil"}},
			"node/nodeconf":          {imports: []string{m + "/fileutil", m + "/libchain"}},
			"node/reconcile/fakecri": {},
		},
	}, {
		name: "the files import the store",
		pkgs: map[string]edge{"fileutil": {imports: []string{m + "/cache"}}},
		want: []string{`fileutil imports cache: layer "files" (0) imports from the higher layer "record store" (1)`},
	}, {
		name: "the files import the engine",
		pkgs: map[string]edge{"fileutil": {imports: []string{m + "/libchain/events"}}},
		want: []string{`fileutil imports libchain/events: layer "files" (0) imports from the higher layer "engine" (2)`},
	}, {
		name: "the store imports the engine",
		pkgs: map[string]edge{"cache": {imports: []string{m + "/libchain"}}},
		want: []string{`cache imports libchain: layer "record store" (1) imports from the higher layer "engine" (2)`},
	}, {
		name: "a store sub-package imports node",
		pkgs: map[string]edge{"cache/faultfs": {imports: []string{m + "/node/metrics"}}},
		want: []string{`cache/faultfs imports node/metrics: layer "record store" (1) imports from the higher layer "node" (3)`},
	}, {
		name: "a new engine package imports node",
		pkgs: map[string]edge{"libchain/events": {imports: []string{m + "/node/metrics"}}},
		want: []string{`libchain/events imports node/metrics: layer "engine" (2) imports from the higher layer "node" (3)`},
	}, {
		name: "node imports a command",
		pkgs: map[string]edge{"node/adopt": {imports: []string{m + "/cmd/internal/cli"}}},
		want: []string{`node/adopt imports cmd/internal/cli: layer "node" (3) imports from the higher layer "binaries" (4)`},
	}, {
		name: "the CNI binary links node through the engine",
		pkgs: map[string]edge{"plugins/catena": {imports: []string{m + "/libchain"}, deps: []string{m + "/cache", m + "/libchain", m + "/node/metrics"}}},
		want: []string{`plugins/catena links node/metrics (layer "node") through plugins/catena -> libchain -> node/metrics: a CNI binary links only the store and the engine, never node/ nor client-go`},
	}, {
		name: "the CNI binary links client-go",
		pkgs: map[string]edge{"plugins/catena": {imports: []string{"k8s.io/client-go/kubernetes"}, deps: []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/rest"}}},
		want: []string{`plugins/catena links 2 package(s) of k8s.io/client-go, through plugins/catena -> k8s.io/client-go/kubernetes: a CNI binary links only the store and the engine, never node/ nor client-go`},
	}, {
		name: "a test plugin links node",
		pkgs: map[string]edge{"plugins/testing/failer": {imports: []string{m + "/node/reconcile"}, deps: []string{m + "/node/reconcile"}}},
		want: []string{`plugins/testing/failer links node/reconcile (layer "node") through plugins/testing/failer -> node/reconcile: a CNI binary links only the store and the engine, never node/ nor client-go`},
	}, {
		name: "the CNI binary links OpenTelemetry's API through CNI's pkg/invoke",
		pkgs: map[string]edge{
			"libchain/invoke": {imports: []string{cniInvoke}},
			"plugins/catena":  {imports: []string{m + "/libchain/invoke"}, deps: []string{m + "/libchain/invoke", cniInvoke, otelProp, otelTrace}},
		},
	}, {
		name: "the engine imports OpenTelemetry's API itself",
		pkgs: map[string]edge{
			"libchain/invoke":   {imports: []string{cniInvoke}},
			"libchain/tracectx": {imports: []string{otelTrace}},
			"plugins/catena": {imports: []string{m + "/libchain/invoke", m + "/libchain/tracectx"},
				deps: []string{m + "/libchain/invoke", m + "/libchain/tracectx", cniInvoke, otelProp, otelTrace}},
		},
		want: []string{`plugins/catena links 1 package(s) of go.opentelemetry.io not through ` + cniInvoke +
			`, through plugins/catena -> libchain/tracectx -> ` + otelTrace + `: ` + otelWhy},
	}, {
		name: "the engine links OpenTelemetry's SDK",
		pkgs: map[string]edge{
			"libchain/invoke": {imports: []string{cniInvoke, otelSDK}},
			"plugins/catena":  {imports: []string{m + "/libchain/invoke"}, deps: []string{m + "/libchain/invoke", cniInvoke, otelSDK, otelProp, otelTrace}},
		},
		want: []string{`plugins/catena links 1 package(s) of go.opentelemetry.io not through ` + cniInvoke +
			`, through plugins/catena -> libchain/invoke -> ` + otelSDK + `: ` + otelWhy},
	}, {
		name: "a command imports a test helper",
		pkgs: map[string]edge{"cmd/catena-agent": {imports: []string{m + "/internal/clitest"}}},
		want: []string{`cmd/catena-agent imports internal/clitest: packages under internal/ are test helpers, imported only by tests`},
	}, {
		name: "the engine imports a test helper of integration",
		pkgs: map[string]edge{"libchain": {imports: []string{m + "/integration/fixture"}}},
		want: []string{
			`libchain imports integration/fixture: layer "engine" (2) imports from the higher layer "test helpers" (3)`,
			`libchain imports integration/fixture: packages under integration/ are test helpers, imported only by tests`,
		},
	}, {
		name: "a package no layer covers",
		pkgs: map[string]edge{"hack/gen": {}},
		want: []string{"hack/gen: no layer covers it: give it one in internal/layers/layers_test.go"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph{module: m, pkgs: map[string]*pkg{}, imports: maps.Clone(others)}
			maps.Copy(g.imports, outside)
			for rel, e := range tt.pkgs {
				g.pkgs[rel] = &pkg{ImportPath: m + "/" + rel, Imports: e.imports, Deps: e.deps}
				g.imports[m+"/"+rel] = e.imports
			}
			assert.Equal(t, tt.want, check(g))
		})
	}
}
