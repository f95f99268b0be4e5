package nodeconf

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// Backoff against another writer: a file taken away once (by a writer not
// known to keep doing it) is rewritten after contestMin; taken away again,
// or taken by Cilium's exclusive mode, it is rewritten at most once every
// Config.RewriteBackoff (DefaultRewriteBackoff) while that goes on.
const (
	contestMin = time.Second
	// DefaultRewriteBackoff is Config.RewriteBackoff's default.
	DefaultRewriteBackoff = time.Minute
)

// rewriteCap is the longest wait before a rewrite.
func (c Config) rewriteCap() time.Duration {
	if c.RewriteBackoff > 0 {
		return c.RewriteBackoff
	}
	return DefaultRewriteBackoff
}

// ConflistObserver is told of the generated file's writes and of another
// writer taking it away (the agent's metrics).
type ConflistObserver interface {
	// ConflistWritten: a pass (re)wrote the generated file.
	ConflistWritten()
	// ConflistTaken: the file a pass left in place was renamed, removed or
	// changed by someone else; by is TakenByCilium or TakenByOther.
	ConflistTaken(by string)
	// ConflistBackoff: the wait before the next rewrite changed (0: none).
	ConflistBackoff(d time.Duration)
}

// contest keeps Watch from fighting another writer that takes the
// generated file away as soon as it is written (Cilium with cni.exclusive
// renames every other config of the conf dir to .cilium_bak at start and
// on every change in the dir): each rewrite costs an adoption scan, a
// reload of the runtime's CNI config and a log line, and is undone at once.
//
// After every good pass it remembers the digest of the file left in place;
// an event on the file, or the next pass, that finds it gone or different
// has seen it taken. That is logged once per contest (a warning with the
// cause and the fix, WhoTook), counted, and makes readiness fail with the
// cause; then passes write nothing until the step since the last write has
// passed (held): contestMin the first time, the rewrite cap when it happens
// again or when Cilium took it. A pass that finds the file still in place
// more than twice the step after the last write ends the contest.
type contest struct {
	i     *Installer
	now   func() time.Time
	have  bool              // sum is what the last good pass left in place
	sum   [sha256.Size]byte // its digest
	dir   dirID             // the conf dir it was in
	dirOK bool              // dir is known (not on a filesystem without inodes)
	wrote time.Time         // the last write
	step  time.Duration     // 0: no contest
	taken int               // times taken in this contest
	why   Taken             // the last time
}

// held is a pass's reason while the contest holds the rewrite back.
type held struct {
	Taken
	step time.Duration
}

func (h held) Error() string {
	return fmt.Sprintf("%s; catena-agent rewrites it at most once every %s while this goes on", h.Taken.Error(), h.step)
}

// seen checks that the file the last good pass left in place is still
// there, unchanged; if not, the contest starts or goes on.
func (c *contest) seen() {
	if !c.have {
		return
	}
	data, err := readRegular(c.i.Fs, c.i.generatedPath(), maxConfSize)
	if err == nil && sha256.Sum256(data) == c.sum {
		return
	}
	c.have = false
	if id, ok := confDirID(c.i); c.dirOK && (!ok || id != c.dir) {
		return // the conf dir was replaced or removed: not a writer taking the file
	}
	t, err := WhoTook(c.i.Fs, c.i.Cfg.ConfDir, c.i.Cfg.ConfName)
	if err != nil {
		c.i.Log.Warn("looking for what took the generated conflist away", "error", err)
	}
	c.taken++
	c.why = t
	next := c.i.Cfg.rewriteCap()
	if c.taken == 1 && t.By() != TakenByCilium {
		next = contestMin
	}
	if c.step == 0 {
		c.i.Log.Warn("the generated conflist was taken away after catena-agent wrote it; backing off before rewriting it",
			"file", t.File, "by", t.By(), "rewriteIn", next, "reason", t.Error())
	} else {
		c.i.Log.Info("the generated conflist was taken away again", "file", t.File, "by", t.By(), "times", c.taken, "rewriteIn", next)
	}
	if next != c.step {
		c.step = next
		c.observeBackoff()
	}
	if c.i.Observer != nil {
		c.i.Observer.ConflistTaken(t.By())
	}
	c.i.markNotReady(held{Taken: t, step: c.step}.Error())
}

// hold is the reason a pass now must not write, or nil.
func (c *contest) hold() error {
	if c.step == 0 || !c.now().Before(c.wrote.Add(c.step)) {
		return nil
	}
	return held{Taken: c.why, step: c.step}
}

// due is how long until the held rewrite may happen; 0 if nothing is held.
func (c *contest) due() time.Duration {
	if c.step == 0 || c.have {
		return 0
	}
	return max(c.wrote.Add(c.step).Sub(c.now()), time.Millisecond)
}

// observe updates the contest with a pass's outcome.
func (c *contest) observe(st Status, err error) {
	if err != nil || !st.Ready {
		return
	}
	now := c.now()
	c.have, c.sum = true, st.Generated
	c.dir, c.dirOK = confDirID(c.i)
	if st.Wrote {
		c.wrote = now
		return
	}
	if c.step > 0 && now.Sub(c.wrote) > 2*c.step {
		c.i.Log.Info("the generated conflist stayed in place; backoff ended", "file", c.i.generatedPath(), "after", c.step)
		c.step, c.taken = 0, 0
		c.observeBackoff()
	}
}

func (c *contest) observeBackoff() {
	if c.i.Observer != nil {
		c.i.Observer.ConflistBackoff(c.step)
	}
}

// isHeld: err is a held pass's reason, which the contest already logged.
func isHeld(err error) bool {
	var h held
	return errors.As(err, &h)
}

// generatedPath is the generated file's path.
func (i *Installer) generatedPath() string {
	return filepath.Join(i.Cfg.ConfDir, i.Cfg.ConfName)
}

// markNotReady makes the status not ready with reason until the next pass.
func (i *Installer) markNotReady(reason string) {
	i.statusMu.Lock()
	defer i.statusMu.Unlock()
	i.status.Ready, i.status.Reason = false, reason
}

// confDirID identifies the conf dir as it is now; false if it cannot be
// stat'ed or its filesystem has no inodes (afero's MemMapFs).
func confDirID(i *Installer) (dirID, bool) {
	fi, err := i.Fs.Stat(i.Cfg.ConfDir)
	if err != nil {
		return dirID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, false
	}
	return dirID{dev: st.Dev, ino: st.Ino}, true
}
