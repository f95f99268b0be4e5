package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFileMap(t *testing.T) {
	tests := []struct {
		name, src string
		want      []MapEntry
		found     bool
	}{
		{"Files: then a block", "// Package p.\n//\n// Files:\n//\n//\ta.go  A\n//\t      wrapped\n//\tb.go  B\npackage p\n",
			[]MapEntry{{5, "a.go"}, {7, "b.go"}}, true},
		{"# Files heading, prose after", "// Package p.\n//\n// # Files\n//\n//\tdoc.go  this\n//\n// More prose, naming c.go.\npackage p\n",
			[]MapEntry{{5, "doc.go"}}, true},
		{"The files:", "// Package p.\n//\n// The files:\n//\n//\tx.go  X\npackage p\n", []MapEntry{{5, "x.go"}}, true},
		{"no map", "// Package p names a.go in prose.\n//\n//\ta.go  an indented block with no heading\npackage p\n", nil, false},
		{"a heading in prose is not one", "// Package p. Files, by prefix:\n//\n//\tk8s_  the node\npackage p\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := ParseFileMap(tt.src)
			assert.Equal(t, tt.found, found)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCheckFileMaps(t *testing.T) {
	doc := func(files ...string) *fstest.MapFile {
		s := "// Package p.\n//\n// Files:\n//\n"
		for _, f := range files {
			s += "//\t" + f + "  what it holds\n"
		}
		return &fstest.MapFile{Data: []byte(s + "package p\n")}
	}
	src := &fstest.MapFile{Data: []byte("package p\n")}
	fsys := fstest.MapFS{
		"ok/doc.go": doc("doc.go", "a.go"), "ok/a.go": src, "ok/a_test.go": src,
		"drift/doc.go": doc("doc.go", "a.go", "gone.go", "a.go"), "drift/a.go": src, "drift/new.go": src,
		"nomap/doc.go": {Data: []byte("// Package p.\npackage p\n")}, "nomap/a.go": src,
		"nodoc/a.go": src, "nodoc/b.go": src,
		"single/a.go": src,
	}
	got, err := CheckFileMaps(fsys, []string{"ok", "drift", "nomap", "nodoc", "single"})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"drift/doc.go:7: file map: gone.go does not exist in drift",
		"drift/doc.go:8: file map: a.go is listed twice (first at line 6)",
		"drift/doc.go:1: file map: new.go is not listed",
		`nomap/doc.go:1: no file map (a "Files:" line and an indented block, one file a line)`,
		"nodoc/a.go:1: package nodoc has 2 files and no doc.go to list them",
	}, problemLines(got))
}

func TestCheckCodeMap(t *testing.T) {
	fsys := fstest.MapFS{
		"arch.md": {Data: []byte("| directory | what |\n|---|---|\n" +
			"| `a/` | A |\n| `b/` | B: `c/` the C, `d` the D |\n| `gone/` | a directory no more |\n")},
		"a/x.go": {}, "b/x.go": {}, "b/c/x.go": {}, "b/d/x.go": {}, "b/e/x.go": {}, "f/x.go": {},
	}
	got, err := CheckCodeMap(fsys, "arch.md", []string{"a", "b", "b/c", "b/d", "b/e", "f"})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"arch.md:5: code map: gone/ is not a directory of the repository",
		"arch.md:1: code map: package b/e has no row, and no row above it names it",
		"arch.md:1: code map: package f has no row, and no row above it names it",
	}, problemLines(got))
}

// problemLines is each problem as its one-line text.
func problemLines(ps []Problem) []string {
	var lines []string
	for _, p := range ps {
		lines = append(lines, p.String())
	}
	return lines
}

// modulePackages lists the module's package directories, relative to its
// root, by go list.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var dirs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		require.NoError(t, err)
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	require.NotEmpty(t, dirs)
	return dirs
}

// TestRepositoryFileMaps checks every package's doc.go file map against
// its files, and docs/architecture.md's code map against go list.
func TestRepositoryFileMaps(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	fsys := os.DirFS(root)
	pkgs := modulePackages(t, root)
	problems, err := CheckFileMaps(fsys, pkgs)
	require.NoError(t, err)
	more, err := CheckCodeMap(fsys, "docs/architecture.md", pkgs)
	require.NoError(t, err)
	for _, p := range append(problems, more...) {
		t.Error(p)
	}
}
