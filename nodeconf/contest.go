package nodeconf

import (
	"crypto/sha256"
	"log/slog"
	"path/filepath"
	"time"
)

// contestMin is the first backoff step against another writer.
const contestMin = time.Second

// contest backs the watch off when another writer keeps changing or
// removing the generated file (Cilium with cni.exclusive renames every
// other config in the conf dir away): each rewrite costs an adoption scan,
// a reload of the runtime's CNI config and a log line, and the other
// writer undoes it at once. A rewrite of the very content written last, by
// a pass within twice the current step of that write, doubles the step (up
// to max, the resync period); the next event-driven pass waits until the
// step has passed since the last write. The file staying in place through
// a pass after twice the step ends the backoff. Each step is logged once.
type contest struct {
	max   time.Duration
	log   *slog.Logger
	step  time.Duration
	last  [sha256.Size]byte
	wrote time.Time
}

// wait is how long to wait before the next event-driven pass.
func (c *contest) wait(d time.Duration) time.Duration {
	if c.step == 0 {
		return d
	}
	return max(d, time.Until(c.wrote.Add(c.step)))
}

// observe updates the backoff with a pass's outcome.
func (c *contest) observe(i *Installer, st Status, err error) {
	now := time.Now()
	if !st.Wrote {
		if err == nil && c.step > 0 && now.Sub(c.wrote) > 2*c.step {
			c.log.Info("the generated conflist stayed in place; backoff ended", "after", c.step)
			c.step = 0
		}
		return
	}
	path := filepath.Join(i.Cfg.ConfDir, i.Cfg.ConfName)
	data, rerr := readRegular(i.Fs, path, maxConfSize)
	if rerr != nil {
		c.log.Warn("reading back the generated conflist", "file", path, "error", rerr)
		return
	}
	sum := sha256.Sum256(data)
	if sum == c.last && now.Sub(c.wrote) <= 2*max(c.step, contestMin) {
		next := min(max(2*c.step, contestMin), c.max)
		if next != c.step {
			c.step = next
			c.log.Warn("the generated conflist keeps being changed or removed by another writer; backing off before rewriting it",
				"file", path, "next", c.step,
				"likely", "another CNI owns the conf dir, e.g. Cilium with cni.exclusive=true renames every other config away; disable that, or pods bypass Catena")
		}
	}
	c.last, c.wrote = sum, now
}
