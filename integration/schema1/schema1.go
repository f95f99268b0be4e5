package schema1

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
)

//go:embed testdata/records testdata/pending
var files embed.FS

// The world the records describe.
const (
	Network = "catena-s1"
	IfName  = "eth0"
	// Base holds the cache dir the records were made in, host-local's
	// dataDir and the failer's faultFile.
	Base      = "/run/catena-s1"
	IPAMDir   = Base + "/ipam"
	FaultFile = Base + "/fault"
	Bridge    = "cs1br0"
	Subnet    = "10.253.71.0/24"
)

// Attachment is one record of the set.
type Attachment struct {
	ContainerID string
	NetNS       string
	// IP is the address its bridge step holds (host-local's, in Subnet).
	IP       string
	HostPort int
	// Pending: the old build left a pending-teardown marker (empty).
	Pending bool
}

// Attachments are the records, in the order they were made.
var Attachments = []Attachment{
	{ContainerID: "s1-a-complete", NetNS: "/run/netns/catena-s1-a", IP: "10.253.71.2/24", HostPort: 39701},
	{ContainerID: "s1-d-v040-complete", NetNS: "/run/netns/catena-s1-d", IP: "10.253.71.3/24", HostPort: 39704},
	{ContainerID: "s1-e-crashed-add", NetNS: "/run/netns/catena-s1-e", IP: "10.253.71.4/24", HostPort: 39705},
	{ContainerID: "s1-f-crashed-rollback", NetNS: "/run/netns/catena-s1-f", IP: "10.253.71.5/24", HostPort: 39706},
	{ContainerID: "s1-c-del-failed", NetNS: "/run/netns/catena-s1-c", IP: "10.253.71.6/24", HostPort: 39703, Pending: true},
	{ContainerID: "s1-b-rollback-failed", NetNS: "/run/netns/catena-s1-b", IP: "10.253.71.7/24", HostPort: 39702, Pending: true},
}

// ByID returns the attachment of a container ID; it panics on an unknown
// one (a typo in a test).
func ByID(containerID string) Attachment {
	for _, a := range Attachments {
		if a.ContainerID == containerID {
			return a
		}
	}
	panic("schema1: no attachment " + containerID)
}

// Copy creates cacheDir (0700; it must not exist) and copies the records
// and pending markers into it with the layout the old build wrote, as 0600
// files in 0700 directories.
func Copy(cacheDir string) error {
	if err := os.Mkdir(cacheDir, 0o700); err != nil {
		return fmt.Errorf("schema1: cache dir: %w", err)
	}
	return fs.WalkDir(files, "testdata", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "testdata" {
			return err
		}
		rel, err := url.PathUnescape(name[len("testdata/"):]) // %3A is ':'
		if err != nil {
			return fmt.Errorf("schema1: %s: %w", name, err)
		}
		dst := filepath.Join(cacheDir, filepath.FromSlash(rel))
		if d.IsDir() {
			return errors.Join(os.Mkdir(dst, 0o700), os.Chmod(dst, 0o700))
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, werr := f.Write(data)
		return errors.Join(werr, f.Close())
	})
}

// RecordPath is where Copy puts a container's record under cacheDir.
func RecordPath(cacheDir, containerID string) string {
	return filepath.Join(cacheDir, "records", Network, containerID+":"+IfName+".json")
}

// PendingPath is where Copy puts a container's pending marker under
// cacheDir (if it has one).
func PendingPath(cacheDir, containerID string) string {
	return filepath.Join(cacheDir, "pending", Network, containerID+":"+IfName)
}

// Raw returns a container's record file as checked in.
func Raw(containerID string) ([]byte, error) {
	return files.ReadFile(path.Join("testdata/records", Network, containerID+"%3A"+IfName+".json"))
}
