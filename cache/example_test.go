package cache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
)

// A record's life: lock the attachment, save what the chain did, read it
// back, list it, remove it once torn down.
func ExampleDiskStore() {
	dir, err := os.MkdirTemp("", "catena-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	store := cache.NewDiskStore(afero.NewOsFs(), dir, cache.NewFlockLocker(filepath.Join(dir, cache.LocksDir)))

	key := cache.Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}
	unlock, err := store.Lock(context.Background(), key, cache.Holder{PID: os.Getpid(), Verb: "ADD", Since: time.Now()})
	if err != nil {
		fmt.Println(err)
		return
	}

	rec := &cache.Record{
		Key: key, Phase: cache.PhaseComplete, CNIVersion: "1.1.0",
		Steps:   []cache.Step{{Index: 0, Type: "bridge", CNIVersion: "1.1.0", Config: []byte(`{"type":"bridge"}`), State: cache.StepAdded}},
		Created: time.Now(), Updated: time.Now(),
	}
	if err := store.Save(rec); err != nil {
		fmt.Println(err)
		return
	}
	got, err := store.Load(key)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Phase, got.Steps[0].Type, got.Steps[0].State)
	keys, err := store.List()
	fmt.Println(keys, err)
	fmt.Println(store.Remove(key))
	_, err = store.Load(key)
	fmt.Println(errors.Is(err, cache.ErrNotFound))
	fmt.Println(unlock.Unlock())
	// Output:
	// complete bridge added
	// [podnet/c1/eth0] <nil>
	// <nil>
	// true
	// <nil>
}
