package wal

// This file owns AppendGroup: appending the batches of one group commit with
// one write per segment instead of one per batch. The steady-load profile in
// BENCHMARKS.md showed the per-batch write syscalls as the broker's second
// largest cost after fsync.
//
// Invariant: a batch's index entry is added, and EndOffset moves past it,
// only after the write holding it succeeded, exactly as with Append; readers
// never see offsets whose bytes are not in the file.

import "fmt"

// Appended is the outcome of one batch of AppendGroup.
type Appended struct {
	Base, Last Offset
	Err        error
}

// AppendGroup appends batches in order, as Append would one by one, but
// gathers the batches bound for the same segment into a single write. Each
// batch is stamped with its base offset and epoch in place. A batch that is
// not a valid v2 batch (ErrInvalidBatch, ErrCorrupt) is skipped with its
// error and the others still go in; an I/O failure fails the batches not yet
// written and is sticky, as in Append. Not durable until Sync; one appender.
func (l *Log) AppendGroup(batches [][]byte, epoch Epoch) []Appended {
	out := make([]Appended, len(batches))
	hdrs := make([]BatchHeader, len(batches))
	for i, b := range batches {
		hdrs[i], out[i].Err = validateBatch(b)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		failFrom(out, 0, err)
		return out
	}
	for i := range out {
		if out[i].Err == nil {
			// Every batch has the same epoch; the first valid one starts it.
			if err := l.assignEpoch(epoch, l.end, true); err != nil {
				failFrom(out, 0, err)
				return out
			}
			break
		}
	}
	g := groupWriter{l: l, batches: batches, hdrs: hdrs, buf: l.gather[:0]}
	defer func() {
		if cap(g.buf) <= maxGatherKeep {
			l.gather = g.buf[:0] // reused by the next group
		}
	}()
	next := l.end
	for i, b := range batches {
		if out[i].Err != nil {
			continue
		}
		h := &hdrs[i]
		h.BaseOffset, h.LeaderEpoch = next, epoch
		stampBatch(b, next, epoch)
		active := l.segs[len(l.segs)-1]
		if l.needsRoll(active, active.idx.size+int64(g.bytes), *h, len(b)) {
			err := g.flush()
			if err == nil {
				err = l.roll()
			}
			if err != nil {
				failPending(out, g.pending, err)
				failFrom(out, i, err)
				return out
			}
		}
		g.pending = append(g.pending, i)
		g.bytes += len(b)
		out[i].Base, out[i].Last = h.BaseOffset, h.LastOffset()
		next = h.LastOffset() + 1
	}
	if err := g.flush(); err != nil {
		failPending(out, g.pending, err)
	}
	if l.jnl != nil {
		l.journalGroup(batches, out)
	}
	return out
}

// AppendStampedGroup appends batches that already carry their base offsets
// and leader epochs, as a follower copying its leader's log does, gathering
// them into one write per segment like AppendGroup. The first batch's base
// offset must be EndOffset and each next one must follow the last; a batch
// that does not, and every batch after it, fails with ErrInvalidBatch
// (not sticky: the log is unchanged past the batches before it). A batch of
// a new, higher epoch starts a durable entry of the epoch chain before it
// is written; a lower epoch fails with ErrStaleEpoch. Not durable until
// Sync (or the journal's round); one appender.
func (l *Log) AppendStampedGroup(batches [][]byte) []Appended {
	out := make([]Appended, len(batches))
	hdrs := make([]BatchHeader, len(batches))
	for i, b := range batches {
		hdrs[i], out[i].Err = validateBatch(b)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		failFrom(out, 0, err)
		return out
	}
	g := groupWriter{l: l, batches: batches, hdrs: hdrs, buf: l.gather[:0]}
	defer func() {
		if cap(g.buf) <= maxGatherKeep {
			l.gather = g.buf[:0]
		}
	}()
	next := l.end
	for i := range batches {
		if out[i].Err != nil {
			failFrom(out, i, out[i].Err)
			break
		}
		h := &hdrs[i]
		if h.BaseOffset != next {
			failFrom(out, i, fmt.Errorf("wal: stamped batch base offset %d, log end %d: %w", h.BaseOffset, next, ErrInvalidBatch))
			break
		}
		if n := len(l.epochs); n == 0 || h.LeaderEpoch > l.epochs[n-1].Epoch {
			// The chain's new entry is durable before the batch is written,
			// and it must follow the batches gathered so far.
			if err := g.flush(); err != nil {
				failPending(out, g.pending, err)
				failFrom(out, i, err)
				return l.journalStamped(batches, out)
			}
			g.pending = g.pending[:0]
			g.bytes = 0
		}
		if err := l.assignEpoch(h.LeaderEpoch, h.BaseOffset, false); err != nil {
			failFrom(out, i, err)
			break
		}
		active := l.segs[len(l.segs)-1]
		if l.needsRoll(active, active.idx.size+int64(g.bytes), *h, len(batches[i])) {
			err := g.flush()
			if err == nil {
				g.pending, g.bytes = g.pending[:0], 0
				err = l.roll()
			}
			if err != nil {
				failPending(out, g.pending, err)
				failFrom(out, i, err)
				return l.journalStamped(batches, out)
			}
		}
		g.pending = append(g.pending, i)
		g.bytes += len(batches[i])
		out[i].Base, out[i].Last = h.BaseOffset, h.LastOffset()
		next = h.LastOffset() + 1
	}
	if err := g.flush(); err != nil {
		failPending(out, g.pending, err)
	}
	return l.journalStamped(batches, out)
}

// journalStamped journals what AppendStampedGroup wrote and returns out.
func (l *Log) journalStamped(batches [][]byte, out []Appended) []Appended {
	if l.jnl != nil {
		l.journalGroup(batches, out)
	}
	return out
}

// journalGroup submits the batches of a group that were written to the
// journal, failing them all if it cannot. The caller holds wmu.
func (l *Log) journalGroup(batches [][]byte, out []Appended) {
	written := make([][]byte, 0, len(batches))
	for i, b := range batches {
		if out[i].Err == nil {
			written = append(written, b)
		}
	}
	if len(written) == 0 {
		return
	}
	if err := l.journalBatches(written, l.EndOffset()); err != nil {
		failFrom(out, 0, err)
	}
}

// maxGatherKeep bounds the gather buffer a Log keeps between groups; a
// larger group's buffer is left to the collector.
const maxGatherKeep = 4 << 20

// groupWriter holds the batches of an AppendGroup not yet written.
type groupWriter struct {
	l       *Log
	batches [][]byte
	hdrs    []BatchHeader
	pending []int // indexes into batches, in offset order
	bytes   int
	buf     []byte // reused gather buffer
}

// flush writes the pending batches to the active segment with one write and
// then indexes them. The caller holds wmu.
func (g *groupWriter) flush() error {
	if len(g.pending) == 0 {
		return nil
	}
	data := g.batches[g.pending[0]]
	if len(g.pending) > 1 {
		g.buf = g.buf[:0]
		for _, i := range g.pending {
			g.buf = append(g.buf, g.batches[i]...)
		}
		data = g.buf
	}
	l := g.l
	active := l.segs[len(l.segs)-1]
	if _, err := active.file.Write(data); err != nil {
		first := g.hdrs[g.pending[0]].BaseOffset
		return l.fail(fmt.Errorf("wal: append %d batches at offset %d to segment %d: %w", len(g.pending), first, active.base(), err))
	}
	l.mu.Lock()
	for _, i := range g.pending {
		active.idx.add(g.hdrs[i], len(g.batches[i]), l.cfg.IndexIntervalBytes)
	}
	l.end = active.idx.next
	l.mu.Unlock()
	g.pending = g.pending[:0]
	g.bytes = 0
	return nil
}

func failPending(out []Appended, pending []int, err error) {
	for _, i := range pending {
		out[i] = Appended{Err: err}
	}
}

// failFrom fails every batch from i on that had no error yet.
func failFrom(out []Appended, i int, err error) {
	for ; i < len(out); i++ {
		if out[i].Err == nil {
			out[i] = Appended{Err: err}
		}
	}
}
