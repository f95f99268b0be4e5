package doccheck

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// A package's file map is the indented block that follows a line of its
// doc.go's comment that names its files ("Files:", "# Files", "The
// files:"); each line of the block whose first word ends in ".go" is an
// entry, and any other line of it (a wrapped description) is not.
var fileMapHeading = regexp.MustCompile(`(?i)^(# files|(the )?files:)$`)

// MapEntry is one file a map lists, at its line of doc.go.
type MapEntry struct {
	Line int
	File string
}

// ParseFileMap returns the entries of the file map in src, a doc.go, and
// whether it has one.
func ParseFileMap(src string) ([]MapEntry, bool) {
	var out []MapEntry
	found, inBlock := false, false
	for i, raw := range strings.Split(src, "\n") {
		text, ok := strings.CutPrefix(raw, "//")
		if !ok {
			if found {
				break // the comment ended
			}
			continue
		}
		if !found {
			found = fileMapHeading.MatchString(strings.TrimSpace(text))
			continue
		}
		switch {
		case strings.HasPrefix(text, "\t"):
			inBlock = true
			if f := strings.Fields(text); len(f) > 0 && strings.HasSuffix(f[0], ".go") {
				out = append(out, MapEntry{Line: i + 1, File: f[0]})
			}
		case strings.TrimSpace(text) == "":
			// a blank comment line, before or inside the block
		case inBlock:
			return out, true // prose after the block
		}
	}
	return out, found
}

// CheckFileMaps checks the file map of every package directory in dirs
// (slash paths in fsys): a package with a doc.go and more than one non-test
// Go file has a map, the map lists each of its non-test Go files once, and
// every file it lists exists in the directory.
func CheckFileMaps(fsys fs.FS, dirs []string) ([]Problem, error) {
	var out []Problem
	for _, dir := range dirs {
		ps, err := checkFileMap(fsys, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

func checkFileMap(fsys fs.FS, dir string) ([]Problem, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	files, sources := map[string]bool{}, []string{}
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".go") {
			files[name] = true
			if !strings.HasSuffix(name, "_test.go") {
				sources = append(sources, name)
			}
		}
	}
	docName := path.Join(dir, "doc.go")
	if !files["doc.go"] {
		if len(sources) > 1 {
			return []Problem{{path.Join(dir, sources[0]), 1, fmt.Sprintf("package %s has %d files and no doc.go to list them", dir, len(sources))}}, nil
		}
		return nil, nil
	}
	b, err := fs.ReadFile(fsys, docName)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", docName, err)
	}
	listed, found := ParseFileMap(string(b))
	if !found {
		if len(sources) > 1 {
			return []Problem{{docName, 1, "no file map (a \"Files:\" line and an indented block, one file a line)"}}, nil
		}
		return nil, nil
	}
	var out []Problem
	seen := map[string]int{}
	for _, e := range listed {
		switch {
		case seen[e.File] != 0:
			out = append(out, Problem{docName, e.Line, fmt.Sprintf("file map: %s is listed twice (first at line %d)", e.File, seen[e.File])})
		case !files[e.File]:
			out = append(out, Problem{docName, e.Line, fmt.Sprintf("file map: %s does not exist in %s", e.File, dir)})
		}
		if seen[e.File] == 0 {
			seen[e.File] = e.Line
		}
	}
	sort.Strings(sources)
	for _, name := range sources {
		if seen[name] == 0 {
			out = append(out, Problem{docName, 1, fmt.Sprintf("file map: %s is not listed", name)})
		}
	}
	return out, nil
}

// codeMapRow is a row of a code map table: | `dir/` | what it holds |.
var codeMapRow = regexp.MustCompile("^\\| `([^`]+)/` \\|(.*)\\|$")

// CheckCodeMap checks the code map of page (a table whose rows each open
// with a directory, "| `dir/` | ... |") against pkgs, the module's package
// directories relative to its root: every package has a row of its own,
// or is named (`rel` or `rel/`) in the row of a directory above it, and
// every row's directory exists in fsys.
func CheckCodeMap(fsys fs.FS, page string, pkgs []string) ([]Problem, error) {
	b, err := fs.ReadFile(fsys, page)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", page, err)
	}
	rows := map[string]string{} // a row's directory to what it holds
	var out []Problem
	for i, line := range strings.Split(string(b), "\n") {
		m := codeMapRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		rows[m[1]] = m[2]
		if st, err := fs.Stat(fsys, m[1]); err != nil || !st.IsDir() {
			out = append(out, Problem{page, i + 1, fmt.Sprintf("code map: %s/ is not a directory of the repository", m[1])})
		}
	}
	for _, pkg := range pkgs {
		if !codeMapCovers(pkg, rows) {
			out = append(out, Problem{page, 1, fmt.Sprintf("code map: package %s has no row, and no row above it names it", pkg)})
		}
	}
	return out, nil
}

// codeMapCovers says whether pkg has a row, or a directory above it has a
// row naming the rest of its path.
func codeMapCovers(pkg string, rows map[string]string) bool {
	if _, ok := rows[pkg]; ok {
		return true
	}
	for dir := path.Dir(pkg); dir != "."; dir = path.Dir(dir) {
		desc, ok := rows[dir]
		if !ok {
			continue
		}
		rel := strings.TrimPrefix(pkg, dir+"/")
		if strings.Contains(desc, "`"+rel+"`") || strings.Contains(desc, "`"+rel+"/`") {
			return true
		}
	}
	return false
}
