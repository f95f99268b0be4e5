package doccheck

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Problem is one thing wrong with a page, at a line.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// devTalk is prose about how the project is developed rather than what it
// is: a tracker number or a work sitting.
var devTalk = regexp.MustCompile(`(?i)\b(issues?|tasks?|tickets?)\s+#?\d+\b|\bsessions?\b`)

// Check checks pages (slash paths in fsys) and returns what is wrong, in
// file and line order. index, when not "", is the page from which every
// page under its directory must be reachable by relative links.
func Check(fsys fs.FS, pages []string, index string) ([]Problem, error) {
	parsed := map[string]Page{}
	for _, name := range pages {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		parsed[name] = Parse(string(b))
	}
	var out []Problem
	for _, name := range pages {
		out = append(out, checkPage(fsys, name, parsed)...)
	}
	if index != "" {
		out = append(out, unreachable(index, parsed)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, nil
}

func checkPage(fsys fs.FS, name string, parsed map[string]Page) []Problem {
	var out []Problem
	p := parsed[name]
	for i, line := range p.Prose {
		for _, m := range devTalk.FindAllString(line, -1) {
			out = append(out, Problem{name, i + 1, fmt.Sprintf("%q: the docs speak of the project, not of how it is developed", m)})
		}
	}
	for _, l := range p.Links {
		if msg := checkLink(fsys, name, l.Target, parsed); msg != "" {
			out = append(out, Problem{name, l.Line, msg})
		}
	}
	return out
}

// checkLink returns what is wrong with one link target of page name, or "".
func checkLink(fsys fs.FS, name, target string, parsed map[string]Page) string {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Sprintf("link %q: %v", target, err)
	}
	if u.Scheme != "" || u.Host != "" {
		return "" // external: not checked here
	}
	file := name
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return fmt.Sprintf("link %q: absolute paths break outside the repository's web view; make it relative", target)
		}
		file = path.Clean(path.Join(path.Dir(name), u.Path))
		if file == ".." || strings.HasPrefix(file, "../") {
			return fmt.Sprintf("link %q: points outside the repository", target)
		}
		if _, err := fs.Stat(fsys, file); err != nil {
			return fmt.Sprintf("link %q: %s does not exist", target, file)
		}
	}
	if u.Fragment == "" {
		return ""
	}
	p, ok := parsed[file]
	if !ok {
		if !strings.HasSuffix(file, ".md") {
			return fmt.Sprintf("link %q: an anchor into %s, which is not Markdown", target, file)
		}
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return fmt.Sprintf("link %q: %v", target, err)
		}
		p = Parse(string(b))
		parsed[file] = p
	}
	if !p.Anchors[u.Fragment] {
		return fmt.Sprintf("link %q: %s has no heading or anchor #%s", target, file, u.Fragment)
	}
	return ""
}

// unreachable reports every checked page under the index's directory that
// no chain of relative links from the index reaches.
func unreachable(index string, parsed map[string]Page) []Problem {
	seen := map[string]bool{index: true}
	queue := []string{index}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, l := range parsed[cur].Links {
			u, err := url.Parse(l.Target)
			if err != nil || u.Scheme != "" || u.Host != "" || u.Path == "" {
				continue
			}
			next := path.Clean(path.Join(path.Dir(cur), u.Path))
			if _, ok := parsed[next]; ok && !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
	dir := path.Dir(index)
	var out []Problem
	for name := range parsed {
		if !seen[name] && strings.HasPrefix(name, dir+"/") {
			out = append(out, Problem{name, 1, "no link from " + index + " leads here"})
		}
	}
	return out
}
