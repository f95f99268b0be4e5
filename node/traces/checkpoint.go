package traces

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain/events"
)

// CheckpointName is the checkpoint's file, in the journal's directory
// (<cacheDir>/events/): a private file (0600) that only the agent
// writes, atomically and durably.
const CheckpointName = "traces.exported"

// checkpointVersion is the checkpoint's format: a JSON object
//
//	{"version":1,"spanID":"<16 hex>","end":"<RFC 3339>"}
//
// naming the last operation of the last batch the exporter sent (or was
// sending), by its span ID and its end (start plus duration).
const checkpointVersion = 1

// maxCheckpoint bounds the file's read.
const maxCheckpoint = 4096

type checkpoint struct {
	Version int       `json:"version"`
	SpanID  string    `json:"spanID"`
	End     time.Time `json:"end"`
}

func checkpointPath(cacheDir string) string {
	return filepath.Join(filepath.Dir(events.Path(cacheDir)), CheckpointName)
}

func opEnd(op events.Op) time.Time { return op.Start.Add(op.Duration) }

// loadCheckpoint reads the checkpoint; nil when there is none. A file that
// is not one (another version, junk) is an error: the exporter then starts
// after the journal's current end, exporting nothing twice.
func loadCheckpoint(fsys afero.Fs, cacheDir string) (*checkpoint, error) {
	path := checkpointPath(cacheDir)
	b, err := fileutil.ReadSmallFile(fsys, path, maxCheckpoint, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trace checkpoint %s: %w", path, err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("trace checkpoint %s: %w", path, err)
	}
	if c.Version != checkpointVersion || c.SpanID == "" {
		return nil, fmt.Errorf("trace checkpoint %s: version %d, span %q: not one this agent writes", path, c.Version, c.SpanID)
	}
	return &c, nil
}

// saveCheckpoint durably replaces the checkpoint with op's.
func saveCheckpoint(fsys afero.Fs, cacheDir string, op events.Op) error {
	b, err := json.Marshal(checkpoint{Version: checkpointVersion, SpanID: op.SpanID, End: opEnd(op)})
	if err != nil {
		return fmt.Errorf("trace checkpoint: %w", err)
	}
	path := checkpointPath(cacheDir)
	if err := fileutil.WriteFileDurable(fsys, path, b); err != nil {
		return fmt.Errorf("trace checkpoint %s: %w", path, err)
	}
	return nil
}

// resume decides, after a restart, which operations of the journal were
// sent already: those up to the checkpoint's operation when the journal
// still holds it (by position: the journal is read in the order it was
// written), else those that ended by the checkpoint's end.
type resume struct {
	cp *checkpoint
	// found: the journal holds the checkpoint's operation; skipping goes
	// on until it is seen.
	found, skipping bool
	// skipAll: the checkpoint could not be read; every operation in the
	// journal now is skipped (count of them), exporting none twice.
	skipAll int
}

func newResume(fsys afero.Fs, cacheDir string) (*resume, error) {
	cp, cpErr := loadCheckpoint(fsys, cacheDir)
	if cp == nil && cpErr == nil {
		return &resume{}, nil
	}
	ops, _, err := events.Read(fsys, cacheDir, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("reading the journal to resume the trace export: %w", err)
	}
	if cpErr != nil {
		return &resume{skipAll: len(ops)}, cpErr
	}
	r := &resume{cp: cp, skipping: true}
	for _, op := range ops {
		if op.SpanID == cp.SpanID {
			r.found = true
			break
		}
	}
	return r, nil
}

// sent reports whether op was exported before the restart.
func (r *resume) sent(op events.Op) bool {
	switch {
	case r.skipAll > 0:
		r.skipAll--
		return true
	case !r.skipping:
		return false
	case r.found:
		if op.SpanID == r.cp.SpanID {
			r.skipping = false
		}
		return true
	default:
		return !opEnd(op).After(r.cp.End)
	}
}

// polled ends the resume once the journal as it was at the start has been
// read: what follows was appended since, and was never sent.
func (r *resume) polled() {
	r.skipping, r.skipAll = false, 0
}
