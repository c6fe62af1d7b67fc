package cluster

// register_start.go owns the first registration of a broker that does not
// know its previous lease: a data directory that was wiped or replaced (a
// lost disk), or one whose registration record is unreadable. The node id's
// key may still be held by the lease of the incarnation that died with the
// old disk; it lapses within the registration TTL.
//
// Invariant: a broker never takes over a node id whose lease it cannot
// prove is its own; it waits for that lease to lapse. A live broker running
// under the same node id keeps its lease alive, so the wait ends in the
// same ErrNodeIDInUse as before, only later.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// registerRetry is how often a broker waiting for its node id tries again.
const registerRetry = 250 * time.Millisecond

// RegisterAtStart registers, waiting up to twice the registration TTL (and
// a little more, for etcd's own lease rounding) while another lease holds
// the node id.
func (b *Cluster) RegisterAtStart(ctx context.Context) error {
	wait := 2*b.Cfg.RegistrationTTL + 2*time.Second
	deadline := time.Now().Add(wait)
	warned := false
	for {
		err := b.register(ctx)
		if err == nil {
			b.clearOwnDrain(ctx)
			return nil
		}
		if !errors.Is(err, meta.ErrNodeIDInUse) || time.Now().After(deadline) {
			if err != nil && warned {
				return fmt.Errorf("%w (waited %v for the holder's lease to lapse: is another broker running as node %d?)", err, wait, b.Cfg.NodeID)
			}
			return err
		}
		if !warned {
			b.Logger.Warn().Err(err).Int64("max_wait_ms", wait.Milliseconds()).
				Msg("node id held by a lease this data directory does not know (a lost or replaced disk?); waiting for it to lapse")
			warned = true
		}
		node.SleepCtx(ctx, registerRetry)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
