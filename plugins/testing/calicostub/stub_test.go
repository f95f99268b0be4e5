package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, stdin, gen, file, err string
	}{
		{"calico shaped", `{"cniVersion":"0.3.1","name":"k8s-pod-network","type":"calico","mtu":1440,"generation":3,"recordFile":"/r","ipam":{"type":"host-local"}}`, "3", "/r", ""},
		{"no generation", `{"cniVersion":"0.3.1","name":"n","type":"calico"}`, "", "", ""},
		{"not JSON", `{"type":`, "", "", "calicostub: parsing the config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, delegate, err := parse([]byte(c.stdin))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.gen, string(got.Generation))
			assert.Equal(t, c.file, got.RecordFile)
			var d map[string]any
			require.NoError(t, json.Unmarshal(delegate, &d))
			assert.Equal(t, "ptp", d["type"], "the delegate is ptp")
			var in map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.stdin), &in))
			delete(in, "type")
			delete(d, "type")
			assert.Equal(t, in, d, "every other field is passed on")
		})
	}
}

func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "eth0"}
	require.NoError(t, record(conf{Generation: json.RawMessage(`2`), RecordFile: path}, "ADD", args))
	require.NoError(t, record(conf{Generation: json.RawMessage(`"b"`), RecordFile: path}, "DEL", args))
	require.NoError(t, record(conf{}, "DEL", args), "no recordFile: nothing to do")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"cmd":"ADD","containerID":"c1","ifName":"eth0","generation":2}`+"\n"+
		`{"cmd":"DEL","containerID":"c1","ifName":"eth0","generation":"b"}`+"\n", string(raw))
	err = record(conf{RecordFile: filepath.Join(path, "sub")}, "ADD", args)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "calicostub: open recordFile"), err.Error())
}
