package replica

// The simulator's disk: synced batches plus pending writes, an fsync that
// makes durable what was written before it started, a hard state file
// replaced atomically, and crash semantics (in-flight syncs dropped; the
// pending writes all lost, or a prefix kept with the last batch torn and
// cut off by recovery). A log may start above offset 0: retention and a
// restart at the leader's log start move its start (sim_retention_test.go).

import "github.com/sluice-mq/sluice/wal"

type pendingWrite struct {
	b   Batch
	seq uint64
}

type simDisk struct {
	synced  []Batch
	pending []pendingWrite
	seq     uint64 // of the last write
	// start: the log start; synced holds the batches from it on, head the
	// epoch chain of the batches retention deleted below it (the epoch
	// checkpoint keeps them).
	start wal.Offset
	head  []EpochEntry

	hs      HardState   // durable
	hsQueue []HardState // writes not yet durable, in order
}

func (d *simDisk) syncedEnd() wal.Offset {
	if n := len(d.synced); n > 0 {
		return d.synced[n-1].End()
	}
	return d.start
}

func (d *simDisk) end() wal.Offset {
	if n := len(d.pending); n > 0 {
		return d.pending[n-1].b.End()
	}
	return d.syncedEnd()
}

// log is everything written, synced or not (the page cache view).
func (d *simDisk) log() []Batch {
	if len(d.pending) == 0 {
		return d.synced
	}
	l := make([]Batch, 0, len(d.synced)+len(d.pending))
	l = append(l, d.synced...)
	for _, p := range d.pending {
		l = append(l, p.b)
	}
	return l
}

func (d *simDisk) append(b Batch) {
	d.seq++
	d.pending = append(d.pending, pendingWrite{b: b, seq: d.seq})
}

// truncate removes every record at or above t, durably; a batch holding t
// goes whole.
func (d *simDisk) truncate(t wal.Offset) {
	for len(d.pending) > 0 && d.pending[len(d.pending)-1].b.End() > t {
		d.pending = d.pending[:len(d.pending)-1]
	}
	for len(d.synced) > 0 && d.synced[len(d.synced)-1].End() > t {
		d.synced = d.synced[:len(d.synced)-1]
	}
}

// syncUpTo makes durable the writes up to seq.
func (d *simDisk) syncUpTo(seq uint64) {
	n := 0
	for n < len(d.pending) && d.pending[n].seq <= seq {
		d.synced = append(d.synced, d.pending[n].b)
		n++
	}
	d.pending = d.pending[n:]
}

// crash drops what was not synced, keeping the first keep pending writes
// (the one after them torn and cut off by recovery).
func (d *simDisk) crash(keep int) {
	d.syncUpTo(0)
	for i := 0; i < keep && i < len(d.pending); i++ {
		d.synced = append(d.synced, d.pending[i].b)
	}
	d.pending = nil
	d.hsQueue = nil
}

// chain is the epoch chain of the synced log.
func chainOf(l []Batch) []EpochEntry {
	var c []EpochEntry
	for _, b := range l {
		c, _ = extendChain(c, b)
	}
	return c
}

// batchAt finds the batch of l starting at off.
func batchAt(l []Batch, off wal.Offset) (int, bool) {
	lo, hi := 0, len(l)
	for lo < hi {
		m := (lo + hi) / 2
		if l[m].Base < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(l) && l[lo].Base == off
}
