package partition

// This file owns the partition's ingress meter's read side: the bytes,
// records and hottest keys Enqueue accepted lately (broker/hotkeys). The
// meter has its own lock; Enqueue feeds it on the caller's goroutine, after
// the batch is queued, so a refused batch is not counted and the owner
// goroutine never pays for it.

import (
	"time"

	"github.com/sluice-mq/sluice/broker/hotkeys"
)

// Ingress reads the partition's ingress rates and at most top hottest keys
// (all it tracks if top <= 0). Only a leader takes produce requests, so a
// follower reports what it took in while it last led, decayed.
func (p *Partition) Ingress(top int) hotkeys.Report {
	return p.ingress.Report(p.clock(), top)
}

// clock is the partition's clock (Options.Now, or the wall clock).
func (p *Partition) clock() time.Time {
	if p.opts.Now == nil {
		return time.Now()
	}
	return p.opts.Now()
}
