package checker

// This file owns the checks on order as one client saw it: nonmonotonic-send
// for producers; poll-skip, nonmonotonic-poll and handover-skip for
// consumers (definitions in chaos/doc.go).
//
// A consumer's *session* on a partition is what it read since its position
// was last set: it starts at a Seek, or at the first poll after an Assign or
// Revoke of its process, or when the poll's consumer, group, member or
// generation differs from the session's. Within a session offsets must go up
// one final-log record at a time.

import (
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/chaos/history"
)

// checkSends reports nonmonotonic-send: a producer's acknowledged offsets on
// a partition, taken in the order it invoked the sends, must increase.
func checkSends(x *index, c *collector) {
	type procPart struct {
		proc history.Process
		p    history.Partition
	}
	byProc := make(map[procPart][]int)
	var order []procPart
	for _, i := range x.acked {
		s := x.h[i].(history.Send)
		k := procPart{s.Process, s.Partition}
		if _, ok := byProc[k]; !ok {
			order = append(order, k)
		}
		byProc[k] = append(byProc[k], i)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].proc != order[j].proc {
			return order[i].proc < order[j].proc
		}
		return order[i].p < order[j].p
	})
	for _, k := range order {
		idxs := byProc[k]
		sort.SliceStable(idxs, func(i, j int) bool {
			return x.h[idxs[i]].(history.Send).Invoke < x.h[idxs[j]].(history.Send).Invoke
		})
		for j := 1; j < len(idxs); j++ {
			prev, cur := x.h[idxs[j-1]].(history.Send), x.h[idxs[j]].(history.Send)
			if cur.Offset > prev.Offset {
				continue
			}
			c.add(Anomaly{Kind: NonmonotonicSend, Partition: k.p, Offsets: []history.Offset{prev.Offset, cur.Offset},
				Keys: []string{prev.Key, cur.Key}, Values: []string{prev.Value, cur.Value},
				Detail: fmt.Sprintf("process %d sent %q (invoked at %d) then %q (invoked at %d); they were acknowledged at offsets %d then %d",
					k.proc, prev.Value, prev.Invoke, cur.Value, cur.Invoke, prev.Offset, cur.Offset)},
				idxs[j-1], idxs[j])
		}
	}
}

// ident is who polled, as far as a session is concerned.
type ident struct {
	consumer history.Consumer
	group    string
	member   string
	gen      history.Generation
}

type session struct {
	id    ident
	hasID bool // false for a session a Seek started, until its first poll

	seeked  bool // started by a Seek to seekTo
	seekTo  history.Offset
	seekIdx int

	hasLast   bool // some record was read in this session
	last      history.Offset
	lastValue string
	lastIdx   int
}

// checkPolls walks the history in order and reports poll-skip,
// nonmonotonic-poll and handover-skip.
func checkPolls(x *index, c *collector) {
	sessions := make(map[history.Process]map[history.Partition]*session)
	lastAssign := make(map[history.Process]int)
	of := func(p history.Process) map[history.Partition]*session {
		m := sessions[p]
		if m == nil {
			m = make(map[history.Partition]*session)
			sessions[p] = m
		}
		return m
	}
	for i, ev := range x.h {
		switch e := ev.(type) {
		case history.Assign:
			delete(sessions, e.Process)
			lastAssign[e.Process] = i
		case history.Revoke:
			delete(sessions, e.Process)
		case history.Seek:
			of(e.Process)[e.Partition] = &session{seeked: true, seekTo: e.Offset, seekIdx: i}
		case history.Poll:
			if len(e.Records) == 0 {
				continue
			}
			m := of(e.Process)
			id := ident{e.Consumer, e.Group, e.Member, e.Generation}
			s := m[e.Partition]
			if s != nil && s.hasID && s.id != id {
				s = nil
			}
			if s == nil {
				s = &session{}
				m[e.Partition] = s
				if e.Consumer == history.ConsumerGroup {
					assignIdx, ok := lastAssign[e.Process]
					if !ok {
						assignIdx = -1
					}
					checkHandover(x, c, i, e, assignIdx)
				}
			}
			s.id, s.hasID = id, true
			pollOrder(x, c, s, i, e)
		}
	}
}

// pollOrder checks one poll's records against its session and advances it.
func pollOrder(x *index, c *collector, s *session, i int, p history.Poll) {
	l := x.logs[p.Partition]
	who := fmt.Sprintf("process %d (%s", p.Process, p.Consumer)
	if p.Consumer == history.ConsumerGroup {
		who += fmt.Sprintf(" %s member %s generation %d", p.Group, p.Member, p.Generation)
	}
	who += ")"
	for _, r := range p.Records {
		from, fromIdx, fromValue, next := history.Offset(0), -1, "", history.Offset(0)
		switch {
		case s.hasLast:
			from, fromIdx, fromValue, next = s.last, s.lastIdx, s.lastValue, s.last+1
		case s.seeked:
			from, fromIdx, next = s.seekTo, s.seekIdx, s.seekTo
		}
		if s.hasLast || s.seeked {
			after := fmt.Sprintf("after offset %d", from)
			if !s.hasLast {
				after = fmt.Sprintf("after seeking to %d", from)
			}
			if r.Offset < next {
				c.add(Anomaly{Kind: NonmonotonicPoll, Partition: p.Partition, Offsets: []history.Offset{from, r.Offset},
					Keys: []string{r.Key}, Values: nonEmpty(fromValue, r.Value),
					Detail: fmt.Sprintf("%s read offset %d %s, with no rebalance or seek in between", who, r.Offset, after)},
					fromIdx, i)
			} else if n, some := l.span(next, r.Offset); n > 0 {
				c.add(Anomaly{Kind: PollSkip, Partition: p.Partition, Offsets: []history.Offset{from, r.Offset},
					Keys: []string{r.Key}, Values: nonEmpty(fromValue, r.Value),
					Detail: fmt.Sprintf("%s read offset %d %s, skipping %d record(s) of the final log (offsets %v...)", who, r.Offset, after, n, some)},
					fromIdx, i, l.at[some[0]].idx)
			}
		}
		s.hasLast, s.last, s.lastValue, s.lastIdx = true, r.Offset, r.Value, i
	}
}

// checkHandover checks the first poll of a group member's new session on a
// partition: it must not start after the group's committed offset.
func checkHandover(x *index, c *collector, i int, p history.Poll, assignIdx int) {
	l := x.logs[p.Partition]
	if l == nil {
		return
	}
	bound, boundIdx, ok := x.commitBound(groupPart{p.Group, p.Partition}).at(p.Invoke)
	if !ok {
		return // nothing committed yet: the start follows the reset policy
	}
	start := p.Records[0].Offset
	if start <= bound {
		return
	}
	n, some := l.span(bound, start)
	if n == 0 {
		return
	}
	c.add(Anomaly{Kind: HandoverSkip, Partition: p.Partition, Offsets: []history.Offset{bound, start},
		Keys: []string{p.Records[0].Key}, Values: []string{p.Records[0].Value},
		Detail: fmt.Sprintf("member %s (process %d) of group %s started generation %d on partition %d at offset %d, but the group's committed offset was at most %d: %d record(s) of the final log (offsets %v...) were skipped",
			p.Member, p.Process, p.Group, p.Generation, p.Partition, start, bound, n, some)},
		boundIdx, assignIdx, i, l.at[some[0]].idx)
}

func nonEmpty(vs ...string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
