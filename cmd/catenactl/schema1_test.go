package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/integration/schema1"
)

// TestListShowSchema1Records: list and show read the records catena
// 1daa3b7 wrote (integration/schema1) as that build left them.
func TestListShowSchema1Records(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, schema1.Copy(f.cacheDir))
	out, stderr, code := f.run("list")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	rows := tableRows(out)
	require.Len(t, rows, 1+len(schema1.Attachments), out)
	for _, want := range [][]string{
		{"s1-a-complete", "eth0", "complete"},
		{"s1-b-rollback-failed", "eth0", "needs-teardown"},
		{"s1-c-del-failed", "eth0", "needs-teardown"},
		{"s1-d-v040-complete", "eth0", "complete"},
		{"s1-e-crashed-add", "eth0", "adding"},
		{"s1-f-crashed-rollback", "eth0", "tearing-down"},
	} {
		assert.True(t, hasRow(rows, append([]string{schema1.Network}, want...)...), "row %v in\n%s", want, out)
	}
	assert.Contains(t, out, "bridge:added portmap:added failer:del-failed failer:deleted")

	out, stderr, code = f.run("--json", "show", "s1-d-v040-complete")
	require.Equal(t, 0, code, stderr)
	recs := decodeJSON[[]map[string]any](t, out)
	require.Len(t, recs, 1)
	assert.Equal(t, "0.4.0", recs[0]["cniVersion"])
	assert.Equal(t, schema1.ByID("s1-d-v040-complete").NetNS, recs[0]["netns"])
	steps, _ := recs[0]["steps"].([]any)
	require.Len(t, steps, 3)
	portmap, _ := steps[1].(map[string]any)
	assert.Equal(t, "1.0.0", portmap["cniVersion"])
}
