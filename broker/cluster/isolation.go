package cluster

// isolation.go owns the controller's step aside when its peers cannot reach
// it. Followers that cannot reach a partition's leader complain to the
// controller, which elects another leader; but when that leader is the
// controller itself and only its links to the other brokers are cut (etcd
// still reaches it, so its leases live on), the complaints never arrive and
// the partition stays unavailable (safe: nothing is acknowledged without the
// quorum). The chaos suite's leader-isolated scenario showed it.
//
// So the controller watches the partitions it leads: when, for
// isolationWait in a row, some partition it leads has other live replicas
// but none of them in sync (none has fetched lately), it resigns its
// controller election and stands again only after a pause. Another broker,
// one the followers do reach, becomes controller, hears their complaints
// and elects a leader among them; the fenced old leader steps down when it
// sees the new state in etcd.
//
// Invariant: resigning changes only who the controller is; it never
// writes partition state, so it cannot break the election's safety (a new
// controller fences a quorum before any leader change, as always). At most
// one resignation signal is pending (ctlResign has capacity 1).

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/broker/replica"
)

// isolationCheck is how often the controller looks for unfollowed
// partitions.
const isolationCheck = 250 * time.Millisecond

// isolationWait is how long a partition this controller leads must stay
// unfollowed before it resigns: two controller leases (4 s by default), so
// that a follower restarting or catching up does not move the controller.
func (b *Cluster) isolationWait() time.Duration { return 2 * b.Cfg.ControllerTTL }

// isolationLoop signals ctlResign while this broker is the controller and
// leads a partition none of whose live followers is in sync.
func (b *Cluster) isolationLoop(ctx context.Context) {
	t := time.NewTicker(isolationCheck)
	defer t.Stop()
	var since time.Time // when the current unfollowed stretch began; zero: none
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.ControllerID() != b.Cfg.NodeID || !b.leadsUnfollowed() {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
			continue
		}
		if time.Since(since) >= b.isolationWait() {
			select {
			case b.ctlResign <- struct{}{}:
				b.Logger.Warn().Int64("for_ms", time.Since(since).Milliseconds()).
					Msg("no live follower of a partition this controller leads is in sync; resigning the controller election so that a broker they reach can elect")
			default:
			}
			since = time.Time{}
		}
	}
}

// leadsUnfollowed reports whether this broker leads a partition that has
// other live replicas, none of them in sync.
func (b *Cluster) leadsUnfollowed() bool {
	live := liveNodes(b.Brokers())
	me := replica.NodeID(b.Cfg.NodeID)
	for _, t := range b.SortedTopics() {
		for i, st := range t.States {
			p := t.Partitions[i]
			if p == nil || st.Leader != b.Cfg.NodeID {
				continue
			}
			rs := p.ReplicaStatus()
			if rs.Role != replica.RoleLeader {
				continue
			}
			others := 0
			for _, id := range st.Replicas {
				if n := replica.NodeID(id); n != me && slices.Contains(live, n) {
					others++
				}
			}
			if others > 0 && !slices.ContainsFunc(rs.InSync, func(n replica.NodeID) bool { return n != me }) {
				return true
			}
		}
	}
	return false
}
