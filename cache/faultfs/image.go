package faultfs

import "bytes"

// Mode is one way the machine can go down: it decides which directory
// entries and which file content a reboot finds.
type Mode int

const (
	// ProcessKill: only the process died; the kernel keeps everything it
	// was told, synced or not.
	ProcessKill Mode = iota
	// PowerLoss: only what was synced survives: file content as of its
	// last Sync, directory entries as of the directory's last Sync.
	PowerLoss
	// PowerLossTornTail: as PowerLoss, but a file written since its last
	// Sync keeps the first half of what changed: a torn append, or a torn
	// overwrite in place (the range from the first to the last byte that
	// differs from the synced content).
	PowerLossTornTail
	// PowerLossZeroTail: as PowerLoss, but an unsynced append leaves its
	// length behind, filled with zeros (the file size was committed, its
	// data blocks were not, as ext4 data=writeback allows). An unsynced
	// overwrite in place leaves the old bytes, as PowerLoss does.
	PowerLossZeroTail
	// PowerLossMetadata: every directory entry survives, synced or not,
	// but file content only as synced: a rename or create can outlive the
	// data it was meant to expose.
	PowerLossMetadata
	// PowerLossTornSectors: as PowerLoss, but of a file written since its
	// last Sync, the 512-byte sectors that the change touches persist,
	// all but the first: a torn overwrite in place whose later sectors
	// reached the disk and whose first did not (a disk persists any
	// subset of the sectors of an unsynced write; this is the subset a
	// prefix tear never shows). An append's lost sector reads as zeros.
	PowerLossTornSectors
)

// Sector is the unit a disk persists atomically.
const Sector = 512

// Modes lists every Mode.
var Modes = []Mode{ProcessKill, PowerLoss, PowerLossTornTail, PowerLossZeroTail, PowerLossMetadata, PowerLossTornSectors}

func (m Mode) String() string {
	switch m {
	case ProcessKill:
		return "process-kill"
	case PowerLoss:
		return "power-loss"
	case PowerLossTornTail:
		return "power-loss-torn-tail"
	case PowerLossZeroTail:
		return "power-loss-zero-tail"
	case PowerLossMetadata:
		return "power-loss-metadata"
	case PowerLossTornSectors:
		return "power-loss-torn-sectors"
	}
	return "unknown-mode"
}

// Image returns what a reboot after a crash in mode m finds: a new CrashFs,
// fully durable, that never crashes. Taken before any crash, Image
// (ProcessKill) is a copy of the current state.
func (c *CrashFs) Image(m Mode) *CrashFs {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := NewCrashFs()
	out.root = m.copy(c.root)
	return out
}

// copy returns the node as the reboot finds it. A node reachable by two
// names (a rename not durable on one side) becomes two independent nodes.
func (m Mode) copy(n *node) *node {
	if n.dir {
		src := n.durable
		if m == ProcessKill || m == PowerLossMetadata {
			src = n.entries
		}
		out := newDir(n.perm, n.mtime)
		for name, child := range src {
			out.entries[name] = m.copy(child)
		}
		out.durable = clone(out.entries)
		return out
	}
	data := m.content(n)
	return &node{perm: n.perm, mtime: n.mtime, data: data, synced: bytes.Clone(data)}
}

// content is the file's data after the reboot.
func (m Mode) content(n *node) []byte {
	if m == ProcessKill {
		return bytes.Clone(n.data)
	}
	out := bytes.Clone(n.synced)
	lo, hi, ok := changed(n.synced, n.data)
	if !ok {
		return out
	}
	switch m {
	case PowerLossTornTail:
		half := n.data[lo : lo+(hi-lo)/2]
		if hi > len(out) { // an append: the file ends where the tear does
			out = append(out[:lo:lo], half...)
		} else {
			copy(out[lo:], half)
		}
	case PowerLossTornSectors:
		if len(n.data) > len(out) {
			out = append(out, make([]byte, len(n.data)-len(out))...)
		}
		from := (lo/Sector + 1) * Sector // the first sector touched is lost
		if from < hi {
			copy(out[from:hi], n.data[from:hi])
		}
	case PowerLossZeroTail:
		if len(n.data) > len(out) {
			out = append(out, make([]byte, len(n.data)-len(out))...)
		}
	}
	return out
}

// changed returns the range [lo, hi) of data that differs from synced, the
// content as of the last Sync, when data is synced written over (in place)
// or extended; it reports false when nothing changed, or when the file was
// truncated below its synced size (no store write does that).
func changed(synced, data []byte) (lo, hi int, ok bool) {
	if len(data) < len(synced) {
		return 0, 0, false
	}
	lo = 0
	for lo < len(synced) && synced[lo] == data[lo] {
		lo++
	}
	hi = len(data)
	if hi == len(synced) {
		for hi > lo && synced[hi-1] == data[hi-1] {
			hi--
		}
	}
	return lo, hi, lo < hi
}
