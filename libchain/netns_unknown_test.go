package libchain

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/cache"
)

// TestNetNSUnknownIDIsDoubt: an ID of 0 (the kernel gave none, or reading
// it failed) is unknown, never a mismatch. Where the inode is the ADD's and
// either side's ID is unknown, a teardown nobody asked for passes no
// CNI_NETNS, a runtime's keeps its own path, and GC keeps the record while
// a process is in a namespace with that inode. Another inode at the path
// is still proof of another namespace.
func TestNetNSUnknownIDIsDoubt(t *testing.T) {
	const path = "/var/run/netns/x"
	known := cache.NetNSIdentity{Dev: 4, Ino: 4026532000, ID: 5}
	unknown := cache.NetNSIdentity{Dev: 4, Ino: 4026532000}
	for _, tc := range []struct {
		name          string
		recorded, now cache.NetNSIdentity
		replaced      bool
		wantNobody    string
		wantRuntime   string
		wantKept      bool
	}{
		{name: "unknown at ADD, known now", recorded: unknown, now: known, wantRuntime: path, wantKept: true},
		{name: "known at ADD, unknown now", recorded: known, now: unknown, wantRuntime: path, wantKept: true},
		{name: "unknown at ADD and now", recorded: unknown, now: unknown, wantRuntime: path, wantKept: true},
		{name: "known and equal", recorded: known, now: known, wantNobody: path, wantRuntime: path, wantKept: true},
		{name: "known, another ID on the reused inode", recorded: known, now: cache.NetNSIdentity{Dev: 4, Ino: 4026532000, ID: 6}, replaced: true},
		{name: "unknown at ADD, another inode now", recorded: unknown, now: cache.NetNSIdentity{Dev: 4, Ino: 4026532001}, replaced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNetNS()
			f.at[path] = tc.now
			eng := &Engine{StatNetNS: f.stat}
			recorded := tc.recorded
			rec := &cache.Record{Key: cache.Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}, NetNS: path, NetNSID: &recorded}

			state, why := eng.netnsState(rec)
			assert.Equal(t, tc.replaced, state == nsReplaced, "replaced: %s", why)
			ctx, _ := eng.begin(context.Background(), "TEST", rec.Key)
			assert.Equal(t, tc.wantNobody, eng.teardownNetNS(ctx, rec, path, byNobody), "nobody's teardown")
			assert.Equal(t, tc.wantRuntime, eng.teardownNetNS(ctx, rec, path, byRuntime), "the runtime's DEL")

			// the pause process is in the namespace at the path, as the
			// scan identifies it now
			scan := &fakeScanner{in: map[cache.NetNSIdentity]string{tc.now: "pid 42 (pause)"}}
			kept := eng.stillAlive(rec, &procLook{scanner: scan}, false)
			assert.Equal(t, tc.wantKept, kept != "", "GC keeps it: %q", kept)
		})
	}
}
