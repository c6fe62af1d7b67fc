package checker

// This file owns the checks on values: where each value was read and what
// the final log holds, against what was sent: aborted-read, unexpected-read,
// inconsistent-offsets, duplicate, lost-write and unseen (definitions in
// chaos/doc.go).
//
// Invariant: one fault is reported under one name where the names overlap:
// a value read where the final log holds another one is inconsistent-offsets,
// not also a lost write of the read; a lost write is not also unseen.

import (
	"fmt"

	"github.com/sluice-mq/sluice/chaos/history"
)

// checkValues reports aborted-read, unexpected-read, inconsistent-offsets
// and duplicate.
func checkValues(x *index, c *collector) {
	for _, v := range x.valueOrder {
		ps := x.valuePos[v]
		first := x.valueFirst[v]
		si, sent := x.sends[v]
		if !sent {
			r := x.readOf(ps[0], v)
			c.add(Anomaly{Kind: UnexpectedRead, Partition: ps[0].p, Offsets: []history.Offset{ps[0].o},
				Keys: []string{r.key}, Values: []string{v},
				Detail: fmt.Sprintf("value %q was read at offset %d, but no send in the history produced it", v, ps[0].o)}, first)
			continue
		}
		s := x.h[si].(history.Send)
		if s.Outcome == history.Fail {
			c.add(Anomaly{Kind: AbortedRead, Partition: ps[0].p, Offsets: []history.Offset{ps[0].o},
				Keys: []string{s.Key}, Values: []string{v},
				Detail: fmt.Sprintf("value %q was read at offset %d, but its send definitely failed (%s)", v, ps[0].o, s.Error)}, si, first)
		}
		for _, at := range ps {
			r := x.readOf(at, v)
			if at.p != s.Partition || r.key != s.Key {
				c.add(Anomaly{Kind: UnexpectedRead, Partition: at.p, Offsets: []history.Offset{at.o},
					Keys: []string{r.key, s.Key}, Values: []string{v},
					Detail: fmt.Sprintf("value %q was read in partition %d with key %q, but was sent to partition %d with key %q", v, at.p, r.key, s.Partition, s.Key)}, si, r.idx)
				break
			}
		}
		if len(ps) > 1 {
			a := Anomaly{Kind: Duplicate, Partition: ps[0].p, Keys: []string{s.Key}, Values: []string{v}}
			var idxs []int
			for _, at := range ps {
				a.Offsets = append(a.Offsets, at.o)
				idxs = append(idxs, x.readOf(at, v).idx)
			}
			a.Detail = fmt.Sprintf("value %q was read at %d offsets %s", v, len(ps), posList(ps))
			c.add(a, append([]int{si}, idxs...)...)
		}
	}
	for _, at := range x.posOrder {
		vals := x.atPos[at]
		if len(vals) < 2 {
			continue
		}
		a := Anomaly{Kind: InconsistentOffsets, Partition: at.p, Offsets: []history.Offset{at.o}}
		var idxs []int
		for _, r := range vals {
			a.Keys = append(a.Keys, r.key)
			a.Values = append(a.Values, r.value)
			idxs = append(idxs, r.idx)
		}
		a.Detail = fmt.Sprintf("offset %d of partition %d was read with %d different values", at.o, at.p, len(vals))
		c.add(a, idxs...)
	}
}

// checkLost reports lost-write (acknowledged sends, then values read at a
// position the final log does not hold) and unseen.
func checkLost(x *index, c *collector) {
	reported := make(map[pos]map[string]bool)
	mark := func(at pos, v string) {
		if reported[at] == nil {
			reported[at] = make(map[string]bool)
		}
		reported[at][v] = true
	}
	for _, si := range x.acked {
		s := x.h[si].(history.Send)
		l := x.logs[s.Partition]
		if l == nil {
			continue // noted as unchecked
		}
		if s.Offset < l.logStart {
			x.stats.BelowLogStart++
			continue
		}
		at := pos{s.Partition, s.Offset}
		if why, idxs := x.lostAck(s, l); why != "" {
			mark(at, s.Value)
			c.add(Anomaly{Kind: LostWrite, Partition: s.Partition, Offsets: []history.Offset{s.Offset},
				Keys: []string{s.Key}, Values: []string{s.Value},
				Detail: fmt.Sprintf("%q was acknowledged at offset %d (leader epoch %d); %s", s.Value, s.Offset, s.LeaderEpoch, why)},
				append([]int{si}, append(idxs, l.finalIdx)...)...)
			continue
		}
		if _, read := x.valuePos[s.Value]; !read && s.Offset < l.hw {
			c.add(Anomaly{Kind: Unseen, Partition: s.Partition, Offsets: []history.Offset{s.Offset},
				Keys: []string{s.Key}, Values: []string{s.Value},
				Detail: fmt.Sprintf("%q was acknowledged at offset %d, below the final high watermark %d, and no poll (not even the drain, which ended at %d) returned it", s.Value, s.Offset, l.hw, l.covered)},
				si, l.finalIdx)
		}
	}
	// A value a consumer saw is committed data too (consumers only see
	// offsets below the HW), acknowledged or not.
	for _, at := range x.posOrder {
		l := x.logs[at.p]
		if l == nil || at.o < l.logStart {
			continue
		}
		for _, r := range x.atPos[at] {
			if reported[at][r.value] {
				continue
			}
			var why string
			switch {
			case at.o >= l.hw:
				why = fmt.Sprintf("it is at or above the final high watermark %d", l.hw)
			case at.o < l.covered:
				if _, ok := l.at[at.o]; !ok {
					why = "the final drain returned no record there"
				}
			}
			if why == "" {
				continue
			}
			mark(at, r.value)
			c.add(Anomaly{Kind: LostWrite, Partition: at.p, Offsets: []history.Offset{at.o},
				Keys: []string{r.key}, Values: []string{r.value},
				Detail: fmt.Sprintf("%q was read at offset %d; %s", r.value, at.o, why)},
				x.sendIdx(r.value), r.idx, l.finalIdx)
		}
	}
}

// lostAck says why an acknowledged send at or above its partition's log
// start is lost ("" if it is not), with the events that show it.
func (x *index) lostAck(s history.Send, l *finalLog) (string, []int) {
	at := pos{s.Partition, s.Offset}
	elsewhere, elsewhereIdx := x.elsewhere(s.Value, at)
	switch {
	case s.Offset >= l.hw:
		return fmt.Sprintf("that is at or above the final high watermark %d%s", l.hw, elsewhere), elsewhereIdx
	case s.Offset < l.covered:
		r, ok := l.at[s.Offset]
		if !ok {
			return "the final drain returned no record there" + elsewhere, elsewhereIdx
		}
		if r.value != s.Value {
			return fmt.Sprintf("the final drain returned %q there%s", r.value, elsewhere), append([]int{r.idx}, elsewhereIdx...)
		}
	default: // beyond the drain's end: judged by where it was read
		if elsewhere != "" && !hasPos(x.valuePos[s.Value], at) {
			return "it was never read there" + elsewhere, elsewhereIdx
		}
	}
	return "", nil
}

// elsewhere describes the positions other than at where v was read.
func (x *index) elsewhere(v string, at pos) (string, []int) {
	var others []pos
	var idxs []int
	for _, p := range x.valuePos[v] {
		if p != at {
			others = append(others, p)
			idxs = append(idxs, x.readOf(p, v).idx)
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	return "; the value was read at " + posList(others), idxs
}

// readOf returns the first read of v at a position where it was read.
func (x *index) readOf(at pos, v string) readAt {
	for _, r := range x.atPos[at] {
		if r.value == v {
			return r
		}
	}
	return readAt{idx: -1}
}

// sendIdx is the Send of v, or -1.
func (x *index) sendIdx(v string) int {
	if i, ok := x.sends[v]; ok {
		return i
	}
	return -1
}

func posList(ps []pos) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d/%d", p.p, p.o)
	}
	return "[" + s + "] (partition/offset)"
}
