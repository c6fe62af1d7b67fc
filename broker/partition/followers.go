package partition

// This file owns the read of the leader's view of its followers for
// metrics (node's sluice_partition_follower_lag_offsets): the replica core
// keeps each follower's last fetch offset on the owner goroutine, so a
// reader asks the owner through ctl and waits at most until a deadline; a
// busy or stopped owner leaves the answer out rather than hold a scrape.

import (
	"time"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// FollowerReport is a leader's log end and its followers (replica.Follower)
// as the owner goroutine saw them.
type FollowerReport struct {
	End       wal.Offset
	Followers []replica.Follower
}

// Followers asks the owner goroutine for the leader's view of its
// followers. The answer arrives on the returned channel (buffered, so the
// owner never blocks on it) once the owner has run the request; false if
// the owner is gone or did not take the request by deadline. A partition
// this broker does not lead answers with no followers.
func (p *Partition) Followers(deadline time.Time) (<-chan FollowerReport, bool) {
	ch := make(chan FollowerReport, 1)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case p.ctl <- func() {
		end, fs := p.rep.Followers()
		ch <- FollowerReport{End: end, Followers: fs}
	}:
		return ch, true
	case <-p.done:
	case <-t.C:
	}
	return nil, false
}
