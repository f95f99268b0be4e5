package cache

import "fmt"

// PendingNoteOf returns key's pending-teardown note; ok is false when key
// has none. A note that cannot be read is returned due at once, with the
// reason as err.
func (s *DiskStore) PendingNoteOf(key Key) (note PendingNote, ok bool, err error) {
	if err := key.Validate(); err != nil {
		return PendingNote{}, false, fmt.Errorf("pending note: %w", err)
	}
	note, bad, ok := s.readNote(s.pendingPath(key))
	return note, ok, bad
}
