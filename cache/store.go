package cache

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrNotFound: the attachment has no record.
	ErrNotFound = errors.New("no record")
	// ErrCorrupt: the record exists but cannot be trusted (torn, bad
	// checksum, not a regular file, unknown schema...). Quarantine it.
	ErrCorrupt = errors.New("corrupt record")
	// ErrFutureSchema: the record was written by a newer schema.
	ErrFutureSchema = errors.New("record schema is newer than this catena")
	// ErrLocked: the attachment's lock could not be taken in time.
	ErrLocked = errors.New("attachment is locked")
	// ErrTooLarge: Save refused a record larger than Load accepts.
	ErrTooLarge = errors.New("record too large")
)

// Holder says who holds an attachment's lock. It is written into the lock
// file so that a waiter can name the holder.
type Holder struct {
	PID   int       `json:"pid"`
	Verb  string    `json:"verb"`
	Since time.Time `json:"since"`
}

// LockedError is returned (wrapping ErrLocked) when a lock wait times out.
type LockedError struct {
	Key    Key
	Holder *Holder // nil if the holder could not be read
	Waited time.Duration
}

func (e *LockedError) Error() string {
	if e.Holder == nil {
		return "attachment " + e.Key.String() + " is locked by an unknown holder (waited " + e.Waited.String() + ")"
	}
	return "attachment " + e.Key.String() + " is locked by pid " + strconv.Itoa(e.Holder.PID) + " (" + e.Holder.Verb + " since " +
		e.Holder.Since.UTC().Format(time.RFC3339) + ", waited " + e.Waited.String() + ")"
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Unlocker releases a lock taken by Locker.Lock.
type Unlocker interface {
	Unlock() error
}

// Locker takes per-attachment locks. Only the attachment is locked: never the
// cache dir, the network or the node.
type Locker interface {
	// Lock waits until the attachment's lock is free or ctx is done, and
	// returns a *LockedError (wrapping ErrLocked) on timeout.
	Lock(ctx context.Context, key Key, who Holder) (Unlocker, error)
	// TryLock takes the lock without waiting, or returns ErrLocked.
	TryLock(key Key, who Holder) (Unlocker, error)
}

// Store keeps one durable record per attachment.
type Store interface {
	Locker
	// Load returns the record, ErrNotFound, or an error wrapping ErrCorrupt.
	Load(key Key) (*Record, error)
	// Save durably replaces the record: when Save returns nil, the record
	// survives a crash or power loss. It sets Schema and Updated. It never
	// writes what Load would refuse: a record too large to load back is
	// refused with an error wrapping ErrTooLarge, and nothing is written.
	Save(rec *Record) error
	// Remove durably deletes the record. Removing a missing record is not
	// an error.
	Remove(key Key) error
	// Quarantine moves a corrupt record aside for inspection and returns
	// where it went. A missing record is not an error ("" is returned).
	Quarantine(key Key) (string, error)
	// List returns the keys of all records, in no particular order.
	List() ([]Key, error)
	// SweepTemps removes the temp files that crashes left in network's
	// records, last modified before olderThan and whose attachment's lock
	// is free, and returns their paths.
	SweepTemps(network string, olderThan time.Time) ([]string, error)
}
