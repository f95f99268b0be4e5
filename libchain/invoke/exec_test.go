package invoke

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envProc is a cniinvoke.Exec that runs nothing and keeps the environment
// of every call.
type envProc struct {
	envs [][]string
}

func (p *envProc) ExecPlugin(_ context.Context, _ string, _ []byte, environ []string) ([]byte, error) {
	p.envs = append(p.envs, slices.Clone(environ))
	return nil, nil
}

func (p *envProc) FindInPath(plugin string, paths []string) (string, error) {
	return filepath.Join(paths[0], plugin), nil
}

func (p *envProc) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return version.PluginSupports("1.1.0"), nil
}

// TestRunEnv: every delegate call without a result gets the environment
// the CNI invoke package would give it (the process environment, then its
// CNI_* values), also when the last call's is reused, and a fresh one when
// the verb, a CNI_* value or the process environment changed.
func TestRunEnv(t *testing.T) {
	args := RuntimeArgs{ContainerID: "c1", NetNS: "/var/run/netns/c1", IfName: "eth0", Args: "K8S_POD_NAME=web", Path: "/opt/cni/bin"}
	other := args
	other.ContainerID = "c2"
	tests := []struct {
		name   string
		calls  []Call
		setenv bool // set CATENA_ENV_TEST before the last call
	}{
		{name: "one verb, one attachment", calls: []Call{{Verb: "CHECK", Args: args}, {Verb: "CHECK", Args: args}, {Verb: "CHECK", Args: args}}},
		{name: "another verb", calls: []Call{{Verb: "CHECK", Args: args}, {Verb: "DEL", Args: args}, {Verb: "CHECK", Args: args}}},
		{name: "another attachment", calls: []Call{{Verb: "DEL", Args: args}, {Verb: "DEL", Args: other}}},
		{name: "the process environment changed", calls: []Call{{Verb: "CHECK", Args: args}, {Verb: "CHECK", Args: args}}, setenv: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := &envProc{}
			e := &Exec{Proc: proc}
			var want [][]string
			for i, c := range tc.calls {
				if tc.setenv && i == len(tc.calls)-1 {
					t.Setenv("CATENA_ENV_TEST", "changed")
				}
				c.Type = "tuning"
				require.NoError(t, e.Run(context.Background(), c))
				w := c.invokeArgs().AsEnv()
				slices.Sort(w)
				want = append(want, w)
			}
			require.Len(t, proc.envs, len(tc.calls))
			for i, got := range proc.envs {
				slices.Sort(got)
				assert.Equal(t, want[i], got, "call %d", i)
				assert.Contains(t, got, "CNI_COMMAND="+tc.calls[i].Verb, "call %d", i)
				assert.Contains(t, got, "CNI_CONTAINERID="+tc.calls[i].Args.ContainerID, "call %d", i)
			}
			if tc.setenv {
				assert.Contains(t, proc.envs[len(proc.envs)-1], "CATENA_ENV_TEST=changed")
			}
		})
	}
}
