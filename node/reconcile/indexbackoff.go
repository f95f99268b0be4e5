package reconcile

import (
	"time"

	"github.com/catena-cni/catena/cache"
)

// NoteReader reads the pending-teardown marker of one record
// (cache.DiskStore).
type NoteReader interface {
	PendingNoteOf(key cache.Key) (cache.PendingNote, bool, error)
}

var _ NoteReader = (*cache.DiskStore)(nil)

// IndexBackoff is the pending-marker backoff of the teardown index: the
// engine's teardown writes a record's next due time into its marker under
// <cacheDir>/pending/ when a DEL fails (at once after the first failure,
// then 1 s doubling to 5 min) and clears it on success. IndexBackoff only
// reads it, so the schedule is durable across agent restarts and shared
// with catena's own retrier. A record without a marker,
// or whose marker cannot be read, is due at once.
type IndexBackoff struct {
	Notes NoteReader
}

var _ Backoff = IndexBackoff{}

// Due implements Backoff.
func (b IndexBackoff) Due(key cache.Key, now time.Time) bool {
	note, ok, err := b.Notes.PendingNoteOf(key)
	if !ok || err != nil {
		return true
	}
	return !now.Before(note.Due)
}

// Failed implements Backoff: the failed teardown already wrote the marker.
func (IndexBackoff) Failed(cache.Key, time.Time) {}

// Forget implements Backoff: a successful teardown already cleared it.
func (IndexBackoff) Forget(cache.Key) {}

var _ DueTimer = IndexBackoff{}

// DueAt implements DueTimer: the marker's due time; zero (due since
// forever) for a record without a readable one.
func (b IndexBackoff) DueAt(key cache.Key) time.Time {
	note, ok, err := b.Notes.PendingNoteOf(key)
	if !ok || err != nil {
		return time.Time{}
	}
	return note.Due
}
