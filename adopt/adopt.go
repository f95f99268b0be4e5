// Package adopt gives Catena a record for every attachment that the node's
// primary CNI made before Catena wrapped it, so that the runtime's later DEL,
// which then reaches Catena, still tears it down.
//
// The source is the runtime's libcni cache: after every ADD, libcni (and so
// containerd's go-cni) writes <resultsDir>/<network>-<containerID>-<ifname>,
// holding the conflist used, the runtime's arguments and the final result.
package adopt

import (
	"context"
	"errors"
	"log/slog"
)

// DefaultResultsDir is where libcni keeps its cache by default.
const DefaultResultsDir = "/var/lib/cni/results"

// Options says what to adopt and where to record it.
type Options struct {
	// ResultsDir is libcni's cache dir of results; default DefaultResultsDir.
	ResultsDir string
	// CacheDir is Catena's cacheDir, where the records are written.
	CacheDir string
	// ConfList is the primary's conflist (a .conf already converted to a
	// list); only the entries of its network are adopted.
	ConfList []byte
	// Logger gets one line per adopted attachment; default slog.Default().
	Logger *slog.Logger
}

// Report says what Adopt did.
type Report struct {
	// Adopted counts the records written.
	Adopted int
	// AlreadyPresent counts the attachments that had a record already,
	// which Adopt left alone.
	AlreadyPresent int
	// Skipped names each cache entry not adopted, with the reason.
	Skipped []string
}

// Adopt writes a complete Catena record for every attachment of the primary's
// network found in the libcni cache that has none yet.
func Adopt(ctx context.Context, opts Options) (Report, error) {
	return Report{}, errors.New("adopt: not implemented yet")
}
