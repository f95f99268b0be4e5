package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// File names of an attachment. A container ID has no length limit, and a
// network name none either, but a file name has NAME_MAX (255) bytes. A
// key's own name, "<containerID>:<ifname>", is used while every name made
// from it fits (the longest is the temp file ".<name>.json.tmp"); a longer
// one is replaced by "h-<sha256 hex of network/containerID/ifname>", which
// has no ':' and so never collides with a short key's name. A network
// name longer than a file name is replaced by "h:<sha256 hex of the
// name>" (':' is illegal in network names). The full key is always inside
// the record (and the lock file): List and the teardown index read it
// from there when the name is hashed, and check that it hashes back to the
// name. Names that fit are those of earlier versions, so their records are
// found after an upgrade.
const (
	nameMax = 255
	// maxPlainBase is the longest key name whose temp file name fits.
	maxPlainBase   = nameMax - len(".") - len(recordExt) - len(tmpExt)
	hashedPrefix   = "h-"
	hashedNetwork  = "h:"
	quarantineTail = len(".") + 19 + len(recordExt) // ".<unixnano>.json"
)

// keyName is the name of key's record, lock and pending marker, without
// extension.
func keyName(key Key) string {
	base := key.ContainerID + ":" + key.IfName
	if len(base) <= maxPlainBase {
		return base
	}
	return hashedKeyName(key)
}

func hashedKeyName(key Key) string {
	sum := sha256.Sum256([]byte(key.Network + "/" + key.ContainerID + "/" + key.IfName))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// networkDirName is the name of network's directory under records/,
// locks/ and pending/.
func networkDirName(network string) string {
	if len(network) <= nameMax {
		return network
	}
	return hashedNetworkName(network)
}

func hashedNetworkName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return hashedNetwork + hex.EncodeToString(sum[:])
}

// isHashedName reports whether a key name (without extension) is hashed.
func isHashedName(name string) bool {
	return strings.HasPrefix(name, hashedPrefix) && !strings.Contains(name, ":")
}

// parseKeyName turns a plain key name of a plain network dir back into its
// key; ok is false for a hashed name, a hashed dir or an invalid key.
func parseKeyName(dir, name string) (Key, bool) {
	if strings.HasPrefix(dir, hashedNetwork) {
		return Key{}, false
	}
	cid, ifname, ok := strings.Cut(name, ":")
	if !ok {
		return Key{}, false
	}
	key := Key{Network: dir, ContainerID: cid, IfName: ifname}
	if key.Validate() != nil || keyName(key) != name {
		return Key{}, false
	}
	return key, true
}

// namesKey reports whether key is the one whose files are dir/name.
func namesKey(key Key, dir, name string) bool {
	return key.Validate() == nil && networkDirName(key.Network) == dir && keyName(key) == name
}

// quarantineName is the name (without the ".<unixnano>.json" suffix) under
// which key's record is moved aside.
func quarantineName(key Key) string {
	name := networkDirName(key.Network) + "_" + keyName(key)
	if len(name)+quarantineTail <= nameMax {
		return name
	}
	return hashedKeyName(key)
}

// quarantineDirName is the name under which a network's untrustworthy
// record dir is moved aside.
func quarantineDirName(network string) string {
	name := networkDirName(network)
	if len(name)+len(".")+19 <= nameMax {
		return name
	}
	return hashedNetworkName(network)
}

// validNetwork checks a network name as it is checked in a key.
func validNetwork(network string) error {
	return Key{Network: network, ContainerID: "x", IfName: "x"}.Validate()
}
