package checker

// This file owns the index that one pass over a history builds and every
// check reads: sends by value, reads by position and by value, the final log
// of each partition (from the drain), commits, assignments, replica logs.
//
// Invariant: the index refers to events by their position in the history
// and never copies a record list; building it is linear in the number of
// events and records (map operations), plus one sort of each final log.

import (
	"sort"

	"github.com/sluice-mq/sluice/chaos/history"
)

// pos is a position in the topic: a partition and an offset.
type pos struct {
	p history.Partition
	o history.Offset
}

// readAt is one distinct value read at a position, with the first poll that
// returned it.
type readAt struct {
	key, value string
	epoch      history.Epoch
	idx        int
}

// groupPart names a group's committed offset of one partition.
type groupPart struct {
	group string
	p     history.Partition
}

// finalLog is a partition's log as the drain read it, with its final
// watermarks. covered is where the drain's reading ends: one past the
// highest offset it returned, capped at the HW. Below covered, an offset the
// drain did not return holds no record (a control batch or a hole).
type finalLog struct {
	at       map[history.Offset]readAt
	offsets  []history.Offset // sorted keys of at
	logStart history.Offset
	hw       history.Offset
	covered  history.Offset
	finalIdx int // the Final event
}

// span counts the final log's offsets in [from, to) and returns the first
// few of them.
func (l *finalLog) span(from, to history.Offset) (n int, some []history.Offset) {
	if l == nil || from >= to {
		return 0, nil
	}
	i := sort.Search(len(l.offsets), func(i int) bool { return l.offsets[i] >= from })
	j := sort.Search(len(l.offsets), func(i int) bool { return l.offsets[i] >= to })
	for k := i; k < j && k < i+3; k++ {
		some = append(some, l.offsets[k])
	}
	return j - i, some
}

// replica is one broker's log of one partition, merged from its ReplicaLog
// events. [logStart, hw) is the narrowest range its events claimed.
type replica struct {
	logStart, hw history.Offset
	entries      map[history.Offset]replicaEntry
}

type replicaEntry struct {
	history.ReplicaEntry
	idx int // the ReplicaLog event
}

type index struct {
	h     []history.Event
	stats Stats

	sends map[string]int // value → its Send
	acked []int          // ok sends, in history order

	atPos      map[pos][]readAt // distinct values polled at each position
	posOrder   []pos            // positions in order of first read
	valuePos   map[string][]pos // distinct positions each value was polled at
	valueFirst map[string]int   // the first poll of each value
	valueOrder []string         // values in order of first read
	drained    map[history.Partition]map[history.Offset]readAt
	finals     map[history.Partition]int
	logs       map[history.Partition]*finalLog // partitions with a Final
	needFinal  map[history.Partition]bool      // partitions sent to, polled or tier-read

	commits  map[groupPart][]int        // Commit events per group and partition
	bounds   map[groupPart]*commitBound // built on first use (handover-skip)
	byGroup  map[string][]int           // Commit events per group
	assigns  map[string][]int           // Assign events per group
	replicas map[history.Partition]map[history.BrokerID]*replica
	tiered   []int
}

func buildIndex(h []history.Event, c *collector) *index {
	x := &index{
		h:          h,
		sends:      make(map[string]int),
		atPos:      make(map[pos][]readAt),
		valuePos:   make(map[string][]pos),
		valueFirst: make(map[string]int),
		drained:    make(map[history.Partition]map[history.Offset]readAt),
		finals:     make(map[history.Partition]int),
		logs:       make(map[history.Partition]*finalLog),
		needFinal:  make(map[history.Partition]bool),
		commits:    make(map[groupPart][]int),
		bounds:     make(map[groupPart]*commitBound),
		byGroup:    make(map[string][]int),
		assigns:    make(map[string][]int),
		replicas:   make(map[history.Partition]map[history.BrokerID]*replica),
	}
	x.stats.Events = len(h)
	parts := make(map[history.Partition]bool)
	for i, ev := range h {
		switch e := ev.(type) {
		case history.Send:
			x.addSend(i, e, c)
			parts[e.Partition] = true
		case history.Poll:
			x.addPoll(i, e)
			parts[e.Partition] = true
		case history.Commit:
			x.stats.Commits++
			gp := groupPart{e.Group, e.Partition}
			x.commits[gp] = append(x.commits[gp], i)
			x.byGroup[e.Group] = append(x.byGroup[e.Group], i)
		case history.Assign:
			x.assigns[e.Group] = append(x.assigns[e.Group], i)
		case history.ReplicaLog:
			x.addReplica(i, e)
			parts[e.Partition] = true
		case history.TieredRead:
			x.tiered = append(x.tiered, i)
			x.needFinal[e.Partition] = true
			parts[e.Partition] = true
		case history.Final:
			x.finals[e.Partition] = i
		case history.FaultStart:
			x.stats.Faults++
		}
	}
	x.stats.Partitions = len(parts)
	for p, i := range x.finals {
		x.logs[p] = x.finalLogOf(p, h[i].(history.Final), i)
	}
	return x
}

func (x *index) addSend(i int, s history.Send, c *collector) {
	x.stats.Sends++
	switch s.Outcome {
	case history.OK:
		x.stats.Acked++
		x.acked = append(x.acked, i)
	case history.Fail:
		x.stats.Failed++
	case history.Info:
		x.stats.Unknown++
	}
	x.needFinal[s.Partition] = true
	if prev, dup := x.sends[s.Value]; dup {
		c.note("value %q is sent by events %d and %d; values must be unique per send, so reads of it are judged against the first", s.Value, prev, i)
		return
	}
	x.sends[s.Value] = i
}

func (x *index) addPoll(i int, p history.Poll) {
	x.stats.Polls++
	x.stats.RecordsRead += len(p.Records)
	x.needFinal[p.Partition] = true
	for _, r := range p.Records {
		at := pos{p.Partition, r.Offset}
		ra := readAt{key: r.Key, value: r.Value, epoch: r.LeaderEpoch, idx: i}
		vals, seenPos := x.atPos[at]
		if !seenPos {
			x.posOrder = append(x.posOrder, at)
		}
		if !hasValue(vals, r.Value) {
			x.atPos[at] = append(vals, ra)
		}
		ps, seenVal := x.valuePos[r.Value]
		if !seenVal {
			x.valueOrder = append(x.valueOrder, r.Value)
			x.valueFirst[r.Value] = i
		}
		if !hasPos(ps, at) {
			x.valuePos[r.Value] = append(ps, at)
		}
		if p.Consumer == history.ConsumerDrain {
			log := x.drained[p.Partition]
			if log == nil {
				log = make(map[history.Offset]readAt)
				x.drained[p.Partition] = log
			}
			if _, ok := log[r.Offset]; !ok {
				log[r.Offset] = ra
			}
		}
	}
}

func (x *index) addReplica(i int, r history.ReplicaLog) {
	byBroker := x.replicas[r.Partition]
	if byBroker == nil {
		byBroker = make(map[history.BrokerID]*replica)
		x.replicas[r.Partition] = byBroker
	}
	rep := byBroker[r.Broker]
	if rep == nil {
		rep = &replica{logStart: r.LogStart, hw: r.HighWatermark, entries: make(map[history.Offset]replicaEntry)}
		byBroker[r.Broker] = rep
	}
	rep.logStart = max(rep.logStart, r.LogStart)
	rep.hw = min(rep.hw, r.HighWatermark)
	for _, e := range r.Entries {
		if _, ok := rep.entries[e.Offset]; !ok {
			rep.entries[e.Offset] = replicaEntry{e, i}
		}
	}
}

func (x *index) finalLogOf(p history.Partition, f history.Final, idx int) *finalLog {
	l := &finalLog{at: x.drained[p], logStart: f.LogStart, hw: f.HighWatermark, finalIdx: idx}
	if l.at == nil {
		l.at = make(map[history.Offset]readAt)
	}
	l.offsets = make([]history.Offset, 0, len(l.at))
	for o := range l.at {
		l.offsets = append(l.offsets, o)
	}
	sort.Slice(l.offsets, func(i, j int) bool { return l.offsets[i] < l.offsets[j] })
	l.covered = l.logStart
	if n := len(l.offsets); n > 0 {
		l.covered = max(l.logStart, min(l.offsets[n-1]+1, l.hw))
	}
	return l
}

// sortedPartitions returns the keys of a partition-keyed map in order.
func sortedPartitions[V any](m map[history.Partition]V) []history.Partition {
	ps := make([]history.Partition, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func hasValue(vals []readAt, v string) bool {
	for _, r := range vals {
		if r.value == v {
			return true
		}
	}
	return false
}

func hasPos(ps []pos, at pos) bool {
	for _, p := range ps {
		if p == at {
			return true
		}
	}
	return false
}
