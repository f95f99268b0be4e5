package integration

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The copy-paste blocks of README.md, CONTRIBUTING.md and docs/**/*.md are
// run by TestDocCommands, by this convention:
//
//   - every fenced block whose info string is sh, bash or shell runs, one
//     command at a time (a line, with the lines its trailing backslashes
//     join; comment-only lines are skipped), each in its own bash with
//     pipefail, from the repo root, with bin/ first in PATH;
//   - an HTML comment on the line right before the fence changes that:
//     `<!-- not-run: REASON -->` skips the block (the test logs it, with the
//     reason, as a skipped subtest), and `<!-- run: node -->` runs it on a
//     node fixture: a private mount namespace whose /etc/cni/net.d holds a
//     conflist for network podnet with catena over loopback, and whose
//     /var/lib/cni/catena (catena's default cache dir) holds the record of
//     one attachment of it; `<container>` in its commands is that
//     attachment's container ID;
//   - a command fails the test when it exits non-zero or prints an error
//     (readmeErrorLine), and so does a placeholder (`<word>`) the fixture
//     does not define, or an HTML comment before a fence that is neither.
//
// Other blocks (json, …) are documentation, not run.

// readmeBlock is one fenced shell block of a page.
type readmeBlock struct {
	line     int    // line of the opening fence, from 1
	skip     string // the reason of a not-run comment
	fixture  string // "node" for a run: node comment, else ""
	commands []readmeCommand
}

type readmeCommand struct {
	file string
	line int
	text string
}

var (
	readmeFence     = regexp.MustCompile("^```\\s*([A-Za-z0-9_-]*)")
	readmeDirective = regexp.MustCompile(`^<!--\s*(not-run|run)\s*:\s*(.*?)\s*-->$`)
	// readmePlaceholder is a <word> a reader replaces: shell redirections
	// (`< file`, `<<EOF`) have no letter right after the `<`, or no `>`.
	readmePlaceholder = regexp.MustCompile(`<([a-z][a-z0-9-]*)>`)
	// readmeErrorLine is output that means a command failed even when it
	// exited 0.
	readmeErrorLine = regexp.MustCompile(`(?i)\b(error|panic|fatal)\s*:|command not found|no such file or directory|traceback \(most recent call last\)|expecting value`)
)

var readmeShells = map[string]bool{"sh": true, "bash": true, "shell": true}

// parseReadme returns the shell blocks of page name, with the directive of
// the comment right before each.
func parseReadme(name, text string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	prev := "" // the last non-blank line outside a block
	inFence, pending := false, ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !inFence {
			m := readmeFence.FindStringSubmatch(line)
			if m == nil {
				if strings.TrimSpace(line) != "" {
					prev = strings.TrimSpace(line)
				}
				continue
			}
			inFence = true
			if !readmeShells[m[1]] {
				cur = nil
				continue
			}
			b := readmeBlock{line: n}
			if strings.HasPrefix(prev, "<!--") {
				d := readmeDirective.FindStringSubmatch(prev)
				switch {
				case d == nil:
					return nil, fmt.Errorf("%s:%d: the comment before this block is neither <!-- not-run: REASON --> nor <!-- run: node -->: %s", name, n, prev)
				case d[1] == "not-run" && d[2] != "":
					b.skip = d[2]
				case d[1] == "run" && d[2] == "node":
					b.fixture = "node"
				default:
					return nil, fmt.Errorf("%s:%d: %s: not-run needs a reason, and run knows only node", name, n, prev)
				}
			}
			blocks = append(blocks, b)
			cur = &blocks[len(blocks)-1]
			continue
		}
		if strings.HasPrefix(line, "```") {
			if pending != "" {
				return nil, fmt.Errorf("%s:%d: the block ends inside a continued line", name, n)
			}
			inFence, cur, prev = false, nil, ""
			continue
		}
		if cur == nil {
			continue
		}
		t := strings.TrimSpace(line)
		if pending == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, `\`) {
			if pending == "" {
				cur.commands = append(cur.commands, readmeCommand{file: name, line: n})
			}
			pending += strings.TrimSuffix(t, `\`) + " "
			continue
		}
		if pending != "" {
			cur.commands[len(cur.commands)-1].text = pending + t
			pending = ""
			continue
		}
		cur.commands = append(cur.commands, readmeCommand{file: name, line: n, text: t})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inFence {
		return nil, fmt.Errorf("%s: a fenced block is never closed", name)
	}
	return blocks, nil
}

// expand replaces the placeholders of a command with the fixture's values,
// and fails on one it does not define.
func (c readmeCommand) expand(values map[string]string) (string, error) {
	var missing []string
	out := readmePlaceholder.ReplaceAllStringFunc(c.text, func(p string) string {
		v, ok := values[p[1:len(p)-1]]
		if !ok {
			missing = append(missing, p)
			return p
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s:%d: placeholder %s is not defined here (only a <!-- run: node --> block has <container>); mark the block <!-- not-run: REASON --> or make it runnable", c.file, c.line, strings.Join(missing, ", "))
	}
	return out, nil
}

func TestParseReadme(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []readmeBlock
		wantErr string
	}{
		{
			name: "plain, skipped, node, json and continued",
			text: "intro\n```sh\nmake demo   # comment\n# only a comment\n\nmake x \\\n  --flag\n```\n" +
				"<!-- not-run: needs a cluster -->\n```sh\nkubectl apply -f x\n```\n" +
				"<!-- run: node -->\n\n```bash\ncatenactl show <container>\n```\n" +
				"```json\n{\"a\": 1}\n```\n",
			want: []readmeBlock{
				{line: 2, commands: []readmeCommand{{"README.md", 3, "make demo   # comment"}, {"README.md", 6, "make x  --flag"}}},
				{line: 10, skip: "needs a cluster", commands: []readmeCommand{{"README.md", 11, "kubectl apply -f x"}}},
				{line: 15, fixture: "node", commands: []readmeCommand{{"README.md", 16, "catenactl show <container>"}}},
			},
		},
		{
			name: "a directive applies only to the next fence",
			text: "<!-- not-run: x -->\ntext\n```sh\nls\n```\n",
			want: []readmeBlock{{line: 3, commands: []readmeCommand{{"README.md", 4, "ls"}}}},
		},
		{name: "unknown comment", text: "<!-- skip -->\n```sh\nls\n```\n", wantErr: "README.md:2: the comment before this block"},
		{name: "not-run without reason", text: "<!-- not-run: -->\n```sh\nls\n```\n", wantErr: "not-run needs a reason"},
		{name: "unknown fixture", text: "<!-- run: cluster -->\n```sh\nls\n```\n", wantErr: "run knows only node"},
		{name: "unclosed", text: "```sh\nls\n", wantErr: "never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReadme("README.md", tt.text)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadmeCommandExpand(t *testing.T) {
	values := map[string]string{"container": "cnitool-1"}
	tests := []struct {
		text, want, wantErr string
	}{
		{text: "catenactl show <container> --json", want: "catenactl show cnitool-1 --json"},
		{text: "tr -d '\\0' < /r/<container>:eth0.json | grep x", want: "tr -d '\\0' < /r/cnitool-1:eth0.json | grep x"},
		{text: "cat <<EOF", want: "cat <<EOF"},
		{text: "catenactl repair --abandon <container> --delegate <i>", wantErr: "placeholder <i> is not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := readmeCommand{line: 1, text: tt.text}.expand(values)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadmeErrorLine(t *testing.T) {
	tests := []struct {
		out  string
		want bool
	}{
		{"last error         -", false},
		{"INDEX  TYPE  STATE  ERROR", false},
		{"catenactl: error: no record", true},
		{"bash: line 1: catenactl: command not found", true},
		{"tr: /x: No such file or directory", true},
		{"Expecting value: line 1 column 1 (char 0)", true},
		{"panic: boom", true},
		{"plain conflist           5             5             5           5", false},
	}
	for _, tt := range tests {
		t.Run(tt.out, func(t *testing.T) {
			assert.Equal(t, tt.want, readmeErrorLine.MatchString(tt.out))
		})
	}
}
