package libchain

import (
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// FuzzRuntimeArgs drives ADD and DEL with arbitrary CNI_CONTAINERID,
// CNI_IFNAME, CNI_NETNS and CNI_ARGS (what plugins/catena passes through
// from skel). An attachment key that does not validate is refused with code
// 4 before anything is invoked or written; a valid one is added, recorded
// with its netns and args verbatim (if UTF-8), and deleted. Nothing panics. `go test`
// replays testdata/fuzz/FuzzRuntimeArgs.
func FuzzRuntimeArgs(f *testing.F) {
	f.Add("abc123", "eth0", "/var/run/netns/x", "K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default")
	f.Add("../../x", "eth0", "", "")
	f.Add("c", "../eth0", "/proc/1/ns/net", "IgnoreUnknown=1")
	f.Add("c", "a:b", "", "")
	f.Add("", "eth0", "", "")
	f.Add("c", "", "", "")
	f.Add("c", "0123456789abcdef", "", "")
	f.Add("c\n", "eth0", "\x00", "a=b;;c")
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"podnet","delegateTimeout":"1s","lockTimeout":"1s",
	  "delegates":[{"type":"ipam"},{"type":"tuning"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, containerID, ifname, netns, args string) {
		exec, store := newFakeExec(), newMemStore()
		eng := &Engine{Store: store, Exec: exec}
		r := Request{Conf: conf, Args: RuntimeArgs{ContainerID: containerID, IfName: ifname, NetNS: netns, Args: args, Path: "/opt/cni/bin"}}
		_, addErr := eng.Add(context.Background(), r)
		if rec, err := store.Load(r.Key()); err == nil {
			// JSON holds UTF-8 only: other bytes of CNI_NETNS or CNI_ARGS
			// are recorded as U+FFFD.
			if (utf8.ValidString(netns) && rec.NetNS != netns) || (utf8.ValidString(args) && rec.Args != args) {
				t.Fatalf("recorded netns %q, args %q", rec.NetNS, rec.Args)
			}
		}
		delErr := eng.Del(context.Background(), r)
		if r.Key().Validate() != nil {
			for verb, err := range map[string]error{"ADD": addErr, "DEL": delErr} {
				var te *types.Error
				if !errors.As(err, &te) || te.Code != types.ErrInvalidEnvironmentVariables {
					t.Fatalf("%s with invalid key %q: %v", verb, r.Key(), err)
				}
			}
			if saves, removes := store.counts(); saves+removes > 0 || len(exec.seen()) > 0 {
				t.Fatalf("invalid key %q: %d saves, %d removes, calls %v", r.Key(), saves, removes, exec.seen())
			}
			return
		}
		if addErr != nil || delErr != nil {
			t.Fatalf("valid key %q: ADD %v, DEL %v", r.Key(), addErr, delErr)
		}
		if saves, _ := store.counts(); saves != 3 {
			t.Fatalf("%d saves", saves)
		}
		if _, err := store.Load(r.Key()); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("record left: %v", err)
		}
		for _, c := range exec.callsOf("ADD", "ipam") {
			if c.NetNS != netns || c.ContainerID != containerID {
				t.Fatalf("delegate got netns %q, container %q", c.NetNS, c.ContainerID)
			}
		}
		if got := heldBy(exec, containerID); len(got) > 0 {
			t.Fatalf("still held: %v", got)
		}
	})
}
