package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/workload"
)

func groupPoll(p history.Partition, at time.Duration, records int) history.Poll {
	return history.Poll{Group: group, Partition: p, Records: make([]history.Record, records),
		Invoke: history.Nanos(at), Complete: history.Nanos(at)}
}

// The longest stall is measured per partition and over all of them, up to
// the producers' stop; empty polls, readers' polls and polls after the stop
// do not count.
func TestConsumeStalls(t *testing.T) {
	s := time.Second
	events := []history.Event{
		groupPoll(0, 1*s, 3), groupPoll(1, 2*s, 1),
		groupPoll(0, 4*s, 0), // empty: not a read
		history.Poll{Partition: 0, Records: make([]history.Record, 1), Complete: history.Nanos(5 * s)}, // a reader's
		groupPoll(1, 3*s, 2), groupPoll(0, 8*s, 1), // partition 0 waited 7 s
		groupPoll(1, 9*s, 1), groupPoll(1, 30*s, 1), // after the stop
	}
	got := consumeStalls(events, history.Nanos(10*s))
	if got.Partition != 7*s || got.PartitionOf != 0 {
		t.Errorf("partition stall %v of %d, want 7s of 0", got.Partition, got.PartitionOf)
	}
	if got.Any != 5*s { // from 3 s to 8 s
		t.Errorf("stall over all partitions %v, want 5s", got.Any)
	}
	// The gap from the last read to the producers' stop counts.
	got = consumeStalls([]history.Event{groupPoll(2, 1*s, 1)}, history.Nanos(9*s))
	if got.Partition != 8*s || got.PartitionOf != 2 {
		t.Errorf("trailing stall %v of %d, want 8s of 2", got.Partition, got.PartitionOf)
	}
}

// A rolling restart fails on any send not acknowledged and on a group
// stall beyond maxStall, and passes otherwise.
func TestStrictChecks(t *testing.T) {
	// One partition held back longer (a client's metadata refresh) is not
	// a violation; the whole group reading nothing is.
	if v := strictChecks(workload.Stats{SendsOK: 10}, Stalls{Any: maxStall, Partition: 2 * maxStall}); len(v) != 0 {
		t.Errorf("clean run: %v", v)
	}
	v := strictChecks(workload.Stats{SendsOK: 10, SendsUnknown: 1}, Stalls{Any: maxStall + time.Millisecond})
	if len(v) != 2 || !strings.Contains(v[0], "1 ended unresolved") || !strings.Contains(v[1], "5.001s") {
		t.Errorf("violations %q", v)
	}
}
