package doccheck

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Page is what the checks need of one Markdown file: its links and the
// anchors it defines.
type Page struct {
	Links   []Link
	Anchors map[string]bool
	// Prose is the text outside fenced blocks, one entry per line,
	// numbered from 1; a fenced line is "".
	Prose []string
}

// Link is one inline link or image of a page.
type Link struct {
	Line   int
	Target string
}

var (
	fence       = regexp.MustCompile("^\\s{0,3}(```|~~~)")
	heading     = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpan    = regexp.MustCompile("`+[^`]*`+")
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef      = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	slugDropper = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// Parse reads one Markdown page.
func Parse(text string) Page {
	p := Page{Anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence, marker := false, ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case !inFence:
				inFence, marker = true, m[1]
			case m[1] == marker:
				inFence = false
			}
			p.Prose = append(p.Prose, "")
			continue
		}
		if inFence {
			p.Prose = append(p.Prose, "")
			continue
		}
		p.Prose = append(p.Prose, line)
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.Anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := Slug(m[2])
			if k := seen[s]; k > 0 {
				p.Anchors[s+"-"+strconv.Itoa(k)] = true
			} else {
				p.Anchors[s] = true
			}
			seen[s]++
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			p.Links = append(p.Links, Link{Line: n, Target: m[1]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			p.Links = append(p.Links, Link{Line: n, Target: m[1]})
		}
	}
	return p
}

// Slug is the anchor GitHub gives a heading: its text without markup,
// lowercased, punctuation dropped, spaces to hyphens.
func Slug(h string) string {
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	// A link in a heading keeps its text only.
	h = headingLink.ReplaceAllString(h, "$1")
	h = strings.ToLower(strings.TrimSpace(h))
	h = slugDropper.ReplaceAllString(h, "")
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '-'
		}
		return r
	}, h)
}
