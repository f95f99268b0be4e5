package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"GC (CNI 1.1)", "gc-cni-11"},
		{"`catenactl show`", "catenactl-show"},
		{"What the agent does to the node", "what-the-agent-does-to-the-node"},
		{"Flags, env and ConfigMap keys", "flags-env-and-configmap-keys"},
		{"Ready/readyz reasons", "readyreadyz-reasons"},
		{"[Link](x.md) in a heading", "link-in-a-heading"},
		{"snake_case stays", "snake_case-stays"},
		{"Symptom → check → fix", "symptom--check--fix"},
	}
	for _, tt := range tests {
		t.Run(tt.heading, func(t *testing.T) {
			assert.Equal(t, tt.want, Slug(tt.heading))
		})
	}
}

func TestParse(t *testing.T) {
	p := Parse("# Title\n\nSee [a](a.md#x) and ![img](p.png \"t\").\n" +
		"```sh\n# not a heading\n[not](a link)\n```\n" +
		"## Title\n`[code](span.md)` [b](b.md)\n<a id=\"explicit\"></a>\n[ref]: r.md#y\n")
	assert.Equal(t, map[string]bool{"title": true, "title-1": true, "explicit": true}, p.Anchors)
	assert.Equal(t, []Link{{3, "a.md#x"}, {3, "p.png"}, {9, "b.md"}, {11, "r.md#y"}}, p.Links)
	assert.Equal(t, "", p.Prose[4], "fenced lines are not prose")
}

func TestCheck(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md":            {Data: []byte("# Top\n[docs](docs/README.md) [gone](docs/gone.md) [ext](https://x.org/y#z)\n")},
		"docs/README.md":       {Data: []byte("# Index\n[a](a.md#first) [bad](a.md#nope) [self](#index) [up](../README.md#top)\n")},
		"docs/a.md":            {Data: []byte("## First\nWe fixed this in session 3 for issue 12.\n[abs](/docs/a.md) [out](../../x.md)\n")},
		"docs/orphan.md":       {Data: []byte("# Orphan\n")},
		"docs/notes/n.md":      {Data: []byte("# N\n[img](../bench.png#x)\n")},
		"docs/bench.png":       {Data: []byte("png")},
		"docs/notes/linked.md": {Data: []byte("# Linked\n")},
	}
	fsys["docs/a.md"].Data = append(fsys["docs/a.md"].Data, []byte("[l](notes/linked.md) [n](notes/n.md)\n")...)
	pages := []string{"README.md", "docs/README.md", "docs/a.md", "docs/orphan.md", "docs/notes/n.md", "docs/notes/linked.md"}
	got, err := Check(fsys, pages, "docs/README.md")
	require.NoError(t, err)
	assert.Equal(t, []string{
		`README.md:2: link "docs/gone.md": docs/gone.md does not exist`,
		`docs/README.md:2: link "a.md#nope": docs/a.md has no heading or anchor #nope`,
		`docs/a.md:2: "session": the docs speak of the project, not of how it is developed`,
		`docs/a.md:2: "issue 12": the docs speak of the project, not of how it is developed`,
		`docs/a.md:3: link "/docs/a.md": absolute paths break outside the repository's web view; make it relative`,
		`docs/a.md:3: link "../../x.md": points outside the repository`,
		`docs/notes/n.md:2: link "../bench.png#x": an anchor into docs/bench.png, which is not Markdown`,
		`docs/orphan.md:1: no link from docs/README.md leads here`,
	}, problemLines(got))
}

// TestRepositoryDocs checks the repository's own pages: README.md,
// CONTRIBUTING.md, CHANGELOG.md and every page under docs/, reachable from
// docs/README.md.
func TestRepositoryDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	fsys := os.DirFS(root)
	pages := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"}
	require.NoError(t, fs.WalkDir(fsys, "docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	}))
	require.Contains(t, pages, "docs/README.md", "docs/ has an index")
	problems, err := Check(fsys, pages, "docs/README.md")
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}
