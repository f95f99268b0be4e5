package nodeconf

import (
	"context"
	"fmt"
)

// adoptInPlace runs adoption on a pass whose generated file is in place:
// right after it was written, and on every pass after that although it is
// unchanged. Adoption before the write is not enough: an ADD that started
// through the primary before the runtime reloaded its config (go-cni copies
// its network list when a call starts), or that finished during that
// adoption, writes its libcni entry later, and its DEL, which reaches
// Catena, would find no record and free nothing. The Adopter is expected to
// remember what it settled (node/adopt's Adopter does), so that such a pass
// reads only new entries.
func (i *Installer) adoptInPlace(ctx context.Context, p *Primary) error {
	if i.Adopt == nil {
		return nil
	}
	if err := i.Adopt(ctx, p); err != nil {
		return fmt.Errorf("adopting the attachments of network %q of %s: %w", p.List.Name, p.File, err)
	}
	return nil
}
