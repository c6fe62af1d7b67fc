package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// reassignModel is a partition under reassignment: logs as lengths (every
// follower's log a prefix of its leader's), a leader that appends a record
// per tick and commits what a majority of the current replicas hold, an
// elector that fences a random quorum of the current replicas after every
// leaderless write and elects the longest log among them (Raft's vote),
// followers that copy at random speeds, catch-up marks written at random,
// and writes of the core's steps that are lost at random.
type reassignModel struct {
	rng       *rand.Rand
	now       time.Time
	st        meta.PartitionState
	rec       *meta.Reassignment
	end       map[int32]int64 // each broker's log end (durable)
	lastCopy  map[int32]int   // tick of each follower's last fetch
	hw        int64           // the leader's high watermark
	committed int64           // the highest high watermark ever reached
	az        map[int32]string
	tick      int
	trace     []string
	// plan is the planner under test (planReassign, or a planted bug).
	plan func(reassignInput) reassignStep
}

func (m *reassignModel) logf(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf("t%d ", m.tick)+fmt.Sprintf(format, args...))
}

func (m *reassignModel) quorum() int { return len(m.st.Replicas)/2 + 1 }

// isr is the leader and the followers that fetched in the last 5 ticks.
func (m *reassignModel) isr() []int32 {
	var out []int32
	for _, id := range m.st.Replicas {
		if id == m.st.Leader || m.tick-m.lastCopy[id] <= 5 {
			out = append(out, id)
		}
	}
	return out
}

// elect fences a random quorum of the current replicas and elects the
// longest log among them; the others truncate to it.
func (m *reassignModel) elect() error {
	answers := slices.Clone(m.st.Replicas)
	m.rng.Shuffle(len(answers), func(i, j int) { answers[i], answers[j] = answers[j], answers[i] })
	answers = answers[:m.quorum()]
	w := answers[0]
	for _, id := range answers {
		if m.end[id] > m.end[w] {
			w = id
		}
	}
	m.st.Leader, m.st.LeaderEpoch = w, m.st.LeaderEpoch+1
	m.st.Revision++
	m.hw = min(m.hw, m.end[w])
	for _, id := range m.st.Replicas {
		m.end[id] = min(m.end[id], m.end[w])
	}
	m.logf("elected %d at epoch %d (answers %v, end %d, committed %d)", w, m.st.LeaderEpoch, answers, m.end[w], m.committed)
	if m.end[w] < m.committed {
		return fmt.Errorf("leader %d elected with log end %d below the committed %d: acknowledged records lost", w, m.end[w], m.committed)
	}
	return nil
}

// world advances the partition by one tick.
func (m *reassignModel) world() error {
	m.tick++
	m.now = m.now.Add(100 * time.Millisecond)
	if m.st.Leader == meta.NoLeader {
		if m.rng.IntN(2) == 0 {
			return m.elect()
		}
		return nil
	}
	m.end[m.st.Leader]++
	for _, id := range m.st.Replicas {
		if id != m.st.Leader && m.rng.IntN(3) != 0 {
			m.end[id] = min(m.end[m.st.Leader], m.end[id]+int64(m.rng.IntN(8)))
			m.lastCopy[id] = m.tick
		}
	}
	ends := make([]int64, 0, len(m.st.Replicas))
	for _, id := range m.st.Replicas {
		ends = append(ends, m.end[id])
	}
	slices.Sort(ends)
	slices.Reverse(ends)
	m.hw = max(m.hw, ends[m.quorum()-1])
	m.committed = max(m.committed, m.hw)
	if m.rec != nil {
		for _, id := range m.st.Replicas {
			if m.rng.IntN(2) == 0 {
				mark := meta.SyncedMark{Epoch: m.st.LeaderEpoch, End: m.end[id]}
				if id == m.st.Leader {
					mark.End, mark.LogEnd = m.hw, m.end[id]
				}
				m.rec.Synced[id] = mark
			}
		}
	}
	return nil
}

// apply carries out a step, or loses it.
func (m *reassignModel) apply(step reassignStep) error {
	if m.rng.IntN(5) == 0 {
		m.logf("step lost: %s", step.Why)
		return nil
	}
	switch step.Kind {
	case stepFinish:
		if !slices.Equal(m.st.Replicas, m.rec.Target) {
			return fmt.Errorf("finished with replicas %v, target %v", m.st.Replicas, m.rec.Target)
		}
		m.logf("finished at %v", m.st.Replicas)
		m.rec = nil
	case stepWrite:
		if m.st.Leader == meta.NoLeader {
			return fmt.Errorf("replicas %v written while the partition has no leader", step.Replicas)
		}
		added, removed := diff(step.Replicas, m.st.Replicas), diff(m.st.Replicas, step.Replicas)
		if len(added)+len(removed) > 1 || (step.KeepLeader && len(added)+len(removed) > 0) {
			return fmt.Errorf("replicas %v → %v: more than one member changes at once", m.st.Replicas, step.Replicas)
		}
		if len(removed) == 1 {
			lead := m.rec.Synced[m.st.Leader]
			for _, x := range m.rec.Target {
				if x != m.st.Leader && (m.end[x] < lead.LogEnd || !slices.Contains(m.isr(), x)) {
					return fmt.Errorf("removed %d while target replica %d (end %d) is behind the leader's reported log end %d", removed[0], x, m.end[x], lead.LogEnd)
				}
			}
		}
		for _, x := range added {
			m.end[x] = 0 // a new replica starts empty
			m.lastCopy[x] = -100
		}
		m.logf("%s: %v → %v", step.Why, m.st.Replicas, step.Replicas)
		m.st.Replicas = slices.Clone(step.Replicas)
		if !step.KeepLeader {
			m.st.Leader = meta.NoLeader
		}
		m.st.Revision++
	}
	return nil
}

func diff(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// runReassignModel runs one seed to the end of the reassignment (or its
// cancel) and reports the first broken rule.
func runReassignModel(seed uint64, plan func(reassignInput) reassignStep) (trace []string, err error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	az := map[int32]string{1: "a", 2: "b", 3: "c", 4: "c", 5: "a", 6: "b"}
	targets := [][]int32{{1, 2, 4}, {4, 2, 1}, {5, 2, 3}, {5, 6, 4}, {4, 6, 5}, {2, 1, 3}, {3, 2, 1}, {1, 6, 4}}
	m := &reassignModel{
		rng: rng, now: time.Unix(1e9, 0), az: az, plan: plan,
		st:       meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, Revision: 1},
		end:      map[int32]int64{},
		lastCopy: map[int32]int{},
	}
	target := targets[rng.IntN(len(targets))]
	if err := ValidateTarget(target, m.st.Replicas, az); err != nil {
		return nil, err
	}
	// The partition already holds records when the move starts.
	for range 20 + rng.IntN(50) {
		if err := m.world(); err != nil {
			return m.trace, err
		}
	}
	m.rec = &meta.Reassignment{Target: target, Original: slices.Clone(m.st.Replicas), Synced: map[int32]meta.SyncedMark{}, Revision: 1}
	m.logf("reassign %v → %v", m.st.Replicas, target)
	core := newReassignCore(func() time.Time { return m.now })
	if plan != nil {
		core.plan = plan
	}
	cancelAt, cancelled := -1, false
	if rng.IntN(3) == 0 {
		cancelAt = m.tick + rng.IntN(60)
	}
	for m.rec != nil {
		if m.tick > 5000 {
			return m.trace, fmt.Errorf("not done after 5000 ticks: replicas %v, target %v, leader %d", m.st.Replicas, m.rec.Target, m.st.Leader)
		}
		if m.tick == cancelAt {
			m.rec.Target, m.rec.Cancelled, cancelled = slices.Clone(m.rec.Original), true, true
			m.rec.Revision++
			m.logf("cancelled: back to %v", m.rec.Target)
		}
		in := reassignInput{Rec: *m.rec, State: m.st, ISR: m.isr(), Live: az}
		step := core.Next(in)
		if step.Kind != stepWait {
			if err := m.apply(step); err != nil {
				return m.trace, err
			}
		}
		if err := m.world(); err != nil {
			return m.trace, err
		}
	}
	want := target
	if cancelled {
		want = []int32{1, 2, 3}
	}
	if !slices.Equal(m.st.Replicas, want) {
		return m.trace, fmt.Errorf("done with replicas %v, want %v", m.st.Replicas, want)
	}
	return m.trace, nil
}

// The core moves every seed's partition to its target (or back, after a
// cancel) through single-member changes, never while leaderless, removes
// only once the target replicas caught up, and no election after a change
// loses a committed record.
func TestReassignCoreModel(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 200
	}
	for seed := range uint64(seeds) {
		if trace, err := runReassignModel(seed, nil); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, strings.Join(trace, "\n"))
		}
	}
}

// The model's checker catches the unsafe shortcuts the core avoids:
// writing the whole target at once, and (a subtler one) changing the set
// again before the last change settled (a quorum of the new set holds the
// leader's log): two adds in a row then elect, for some seed, a quorum of
// new replicas that lack committed records.
func TestReassignModelCatchesUnsafeShortcuts(t *testing.T) {
	swap := func(in reassignInput) reassignStep {
		if slices.Equal(in.State.Replicas, in.Rec.Target) {
			return reassignStep{Kind: stepFinish}
		}
		return reassignStep{Kind: stepWrite, Replicas: slices.Clone(in.Rec.Target), Why: "swap"}
	}
	hasty := func(in reassignInput) reassignStep { return planReassignWith(in, true) }
	for _, c := range []struct {
		name string
		plan func(reassignInput) reassignStep
		want string
	}{
		{"whole-set swap", swap, "more than one member"},
		{"no wait for the last change", hasty, "acknowledged records lost"},
	} {
		caught := false
		for seed := range uint64(3000) {
			if _, err := runReassignModel(seed, c.plan); err != nil && strings.Contains(err.Error(), c.want) {
				t.Logf("%s: seed %d: %v", c.name, seed, err)
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("%s: no seed caught it", c.name)
		}
	}
}

func TestValidateTarget(t *testing.T) {
	live := map[int32]string{1: "a", 2: "b", 3: "c", 4: "c"}
	for _, c := range []struct {
		target []int32
		want   string
	}{
		{[]int32{1, 2, 4}, ""},
		{[]int32{4, 2, 1}, ""},
		{[]int32{1, 3, 4}, `brokers 3 and 4 are both in AZ "c"`},
		{[]int32{1, 2, 7}, "broker 7 is not a live broker"},
		{[]int32{1, 2}, "keeps the replication factor"},
		{[]int32{1, 2, 2}, "listed twice"},
		{[]int32{}, "no replicas"},
		{[]int32{1, 2, -1}, "not a node id"},
	} {
		err := ValidateTarget(c.target, []int32{1, 2, 3}, live)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.target, err, c.want)
		}
	}
}

// A step is asked once per state: the same inputs give a wait until the
// state moves or reassignRetry passes on the injected clock.
func TestReassignCoreAsksOncePerState(t *testing.T) {
	now := time.Unix(1e9, 0)
	c := newReassignCore(func() time.Time { return now })
	in := reassignInput{
		Rec: meta.Reassignment{Target: []int32{1, 2, 4}, Original: []int32{1, 2, 3}, Revision: 5,
			Synced: map[int32]meta.SyncedMark{1: {Epoch: 3, End: 10, LogEnd: 12}, 2: {Epoch: 3, End: 12}}},
		State: meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, Revision: 9},
		Live:  map[int32]string{1: "a", 2: "b", 3: "c", 4: "c"},
	}
	if s := c.Next(in); s.Kind != stepWrite || !slices.Equal(s.Replicas, []int32{1, 2, 3, 4}) {
		t.Fatalf("first: %+v", s)
	}
	if s := c.Next(in); s.Kind != stepWait {
		t.Fatalf("again at once: %+v, want a wait", s)
	}
	now = now.Add(reassignRetry)
	if s := c.Next(in); s.Kind != stepWrite {
		t.Fatalf("after reassignRetry: %+v, want the write again", s)
	}
	in.State.Revision++
	if s := c.Next(in); s.Kind != stepWrite {
		t.Fatalf("at a new revision: %+v, want the write", s)
	}
}
