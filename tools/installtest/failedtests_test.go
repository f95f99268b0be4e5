package installtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failedLog is a `go test -v` log as go 1.26 writes it: a passing test, a
// failing one whose subtest failed and whose output resumes under an
// "=== NAME" header, and a second failure.
const failedLog = `=== RUN   TestOK
    a_test.go:3: fine
--- PASS: TestOK (0.00s)
=== RUN   TestBad
=== RUN   TestBad/sub
    a_test.go:4: line 0
    a_test.go:4: line 1
    a_test.go:4: boom
=== NAME  TestBad
    a_test.go:4: after
--- FAIL: TestBad (0.00s)
    --- FAIL: TestBad/sub (0.00s)
=== RUN   TestOK2
    a_test.go:5: fine2
--- PASS: TestOK2 (0.00s)
=== RUN   TestWorse
    a_test.go:6: worse
--- FAIL: TestWorse (0.00s)
FAIL
`

// TestFailedTests runs scripts/failed-tests.sh on a log: each failed
// top-level test's own lines, the last MAX of them, and nothing of the
// tests that passed.
func TestFailedTests(t *testing.T) {
	log := filepath.Join(t.TempDir(), "test.log")
	require.NoError(t, os.WriteFile(log, []byte(failedLog), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"whole", nil, `--- the output of TestBad (the last 7 of 7 lines):
=== RUN   TestBad
=== RUN   TestBad/sub
    a_test.go:4: line 0
    a_test.go:4: line 1
    a_test.go:4: boom
=== NAME  TestBad
    a_test.go:4: after
--- the output of TestWorse (the last 2 of 2 lines):
=== RUN   TestWorse
    a_test.go:6: worse
`},
		{"the last 3", []string{"3"}, `--- the output of TestBad (the last 3 of 7 lines):
    a_test.go:4: boom
=== NAME  TestBad
    a_test.go:4: after
--- the output of TestWorse (the last 2 of 2 lines):
=== RUN   TestWorse
    a_test.go:6: worse
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{filepath.Join(repoRoot(t), "scripts", "failed-tests.sh"), log}, tc.args...)
			out, err := exec.Command("bash", args...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, tc.want, string(out))
		})
	}
}
