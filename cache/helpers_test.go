package cache

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testKey(cid string) Key {
	return Key{Network: "podnet", ContainerID: cid, IfName: "eth0"}
}

// sampleRecord is a realistic record of a three-plugin chain (~2 KB).
func sampleRecord(key Key) *Record {
	t0 := time.Date(2025, 11, 22, 15, 17, 0, 123456789, time.UTC)
	step := func(i int, typ, conf, result string) Step {
		return Step{
			Index: i, Type: typ, CNIVersion: "1.1.0",
			Config:  json.RawMessage(conf),
			State:   StepAdded,
			Result:  json.RawMessage(result),
			Started: t0.Add(time.Duration(i) * time.Millisecond), Finished: t0.Add(time.Duration(i)*time.Millisecond + 500*time.Microsecond),
		}
	}
	ipRes := `{"cniVersion":"1.1.0","interfaces":[{"name":"cni0","mac":"0a:58:0a:f4:00:01"},{"name":"veth1a2b3c4d","mac":"5e:11:22:33:44:55"},{"name":"eth0","mac":"0a:58:0a:f4:00:07","sandbox":"/var/run/netns/cni-1234"}],"ips":[{"interface":2,"address":"10.244.0.7/24","gateway":"10.244.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"}],"dns":{}}`
	return &Record{
		Key:        key,
		Phase:      PhaseComplete,
		CNIVersion: "1.1.0",
		NetNS:      "/var/run/netns/cni-1234",
		Args:       "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=" + key.ContainerID,
		Steps: []Step{
			step(0, "bridge", `{"cniVersion":"1.1.0","name":"podnet","type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`, ipRes),
			step(1, "portmap", `{"cniVersion":"1.1.0","name":"podnet","type":"portmap","capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}}`, ipRes),
			step(2, "bandwidth", `{"cniVersion":"1.1.0","name":"podnet","type":"bandwidth","ingressRate":1000000,"ingressBurst":100000,"egressRate":1000000,"egressBurst":100000}`, ipRes),
		},
		Result:  json.RawMessage(ipRes),
		Created: t0,
		Updated: t0.Add(3 * time.Millisecond),
	}
}

func mustEncode(t testing.TB, rec *Record) []byte {
	t.Helper()
	data, err := Encode(rec)
	require.NoError(t, err)
	return data
}
