package libchain_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/invoke"
)

// printExec is an Executor that prints every call, gives every ADD the same
// address, and fails the ADD of the delegate type failAdd.
type printExec struct{ failAdd string }

var _ libchain.Executor = printExec{}

func (p printExec) Add(ctx context.Context, c libchain.Call) (types.Result, error) {
	// A real delegate gets its request only once the engine recorded that
	// it starts.
	if err := invoke.AwaitStdinGate(ctx); err != nil {
		return nil, err
	}
	fmt.Println("ADD", c.Type)
	if c.Type == p.failAdd {
		return nil, errors.New("no route to the datastore")
	}
	_, ipn, _ := net.ParseCIDR("10.22.0.7/24")
	ipn.IP = net.ParseIP("10.22.0.7")
	return &current.Result{CNIVersion: "1.1.0", IPs: []*current.IPConfig{{Address: *ipn}}}, nil
}

func (p printExec) Run(_ context.Context, c libchain.Call) error {
	fmt.Println(c.Verb, c.Type)
	return nil
}

// A chain whose second delegate fails its ADD: the engine DELs, in reverse,
// the failed delegate (best effort: its ADD may have done part of its work)
// and the one that succeeded, and a runtime's DEL after that finds nothing
// held and succeeds. A chain that succeeds is recorded, then torn down by
// DEL in reverse and its record removed.
func ExampleEngine() {
	conf, err := libchain.ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"podnet","type":"catena",
	  "delegates":[{"type":"bridge"},{"type":"portmap"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	store := cache.NewDiskStore(afero.NewMemMapFs(), "/var/lib/cni/catena", cache.NewMemLocker())
	req := libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{ContainerID: "c1", IfName: "eth0", Path: "/opt/cni/bin"}}

	failing := &libchain.Engine{Store: store, Exec: printExec{failAdd: "portmap"}}
	_, err = failing.Add(context.Background(), req)
	fmt.Println("ADD failed:", err != nil)
	fmt.Println("DEL:", failing.Del(context.Background(), req))

	eng := &libchain.Engine{Store: store, Exec: printExec{}}
	res, err := eng.Add(context.Background(), req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ADD result:", res.(*current.Result).IPs[0].Address.String())
	rec, err := store.Load(req.Key())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("record:", rec.Phase, len(rec.Steps), "steps")
	fmt.Println("DEL:", eng.Del(context.Background(), req))
	_, err = store.Load(req.Key())
	fmt.Println("record gone:", errors.Is(err, cache.ErrNotFound))
	// Output:
	// ADD bridge
	// ADD portmap
	// DEL portmap
	// DEL bridge
	// ADD failed: true
	// DEL: <nil>
	// ADD bridge
	// ADD portmap
	// ADD result: 10.22.0.7/24
	// record: complete 2 steps
	// DEL portmap
	// DEL bridge
	// DEL: <nil>
	// record gone: true
}
