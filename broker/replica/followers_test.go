package replica

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// Followers reports, on the leader only, each follower's last fetch offset
// in the epoch (-1 before its first fetch) and whether it is in sync: a
// stopped follower keeps the offset it last fetched from while the log end
// moves on, and leaves the in-sync set after LagTicks.
func TestFollowersView(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	end, fs := c.nodes[0].r.Followers()
	if len(fs) != 2 || fs[0].ID != 1 || fs[1].ID != 2 || fs[0].Fetched != -1 || fs[1].Fetched != -1 || !fs[0].InSync || !fs[1].InSync {
		t.Fatalf("before any fetch: end %d, %+v", end, fs)
	}
	if _, fs := c.nodes[1].r.Followers(); fs != nil {
		t.Fatalf("a follower reports followers: %+v", fs)
	}
	c.settle(2)
	caughtUp, fs := c.nodes[0].r.Followers()
	if caughtUp != c.nodes[0].end() || fs[0].Fetched != caughtUp || fs[1].Fetched != caughtUp {
		t.Fatalf("after settling: end %d, %+v", caughtUp, fs)
	}

	c.crash(2)
	c.propose(0, 5, 1, true)
	c.settle(12) // more than LagTicks (10)
	end, fs = c.nodes[0].r.Followers()
	if end != caughtUp+wal.Offset(5) || fs[0].Fetched != end || !fs[0].InSync || fs[1].Fetched != caughtUp || fs[1].InSync {
		t.Fatalf("follower 2 stopped at %d: end %d, %+v", caughtUp, end, fs)
	}
}
