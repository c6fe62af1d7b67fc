package partition

// This file owns the log start in replication: the leader tells its
// replica core where its log starts (so the core refuses fetches below it),
// and a follower left below its leader's log start empties its log and
// restarts at the leader's start.
//
// Invariant: the core's log start is brought up to date before every
// replica fetch it judges (syncCoreLogStart, on the owner goroutine).
//
// Everything here runs on the owner goroutine, except StopAndRestartAt,
// which runs after it stopped.

import (
	"fmt"

	"github.com/sluice-mq/sluice/wal"
)

// syncCoreLogStart gives the core the log start, and the base of the batch
// holding it, if the start moved since the core last heard: DeleteRecords,
// retention and restarts move it.
func (p *Partition) syncCoreLogStart() {
	start := p.log.StartOffset()
	if start == p.rep.LogStart() {
		return
	}
	p.rep.SetLogStart(start, p.batchBaseAt(start))
}

// batchBaseAt is the base offset of the batch holding off, or off when it
// cannot be read (at the log end, or a failed read: the core then refuses
// fetches below off only).
func (p *Partition) batchBaseAt(off wal.Offset) wal.Offset {
	data, err := p.log.Read(off, off+1, 1)
	if err != nil || len(data) < wal.BatchHeaderSize {
		return off
	}
	h, err := wal.ParseBatchHeader(data)
	if err != nil {
		return off
	}
	return min(h.BaseOffset, off)
}

// StopAndRestartAt stops the owner as StopAndClose does, then empties the
// log and restarts it at off with no producer state, and closes it: a
// follower whose log ends below its leader's log start can never fetch
// what it lacks (Kafka's truncateFullyAndStartAt). The caller opens the
// partition again; the producer state is then rebuilt from the batches the
// leader sends. off must be at or above the log end.
func (p *Partition) StopAndRestartAt(off wal.Offset) error {
	p.quitOne.Do(func() { close(p.quit) })
	<-p.done
	err := p.log.TruncateFullyAndStartAt(off)
	if err == nil {
		// After the log: a crash in between leaves the old snapshot, below
		// the new start, which the next open reads over an empty log.
		p.producers = make(map[int64]*producerState)
		err = p.writeSnapshot()
	}
	if cerr := p.log.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partition: restart %s-%d at %d: %w", p.topic, p.index, off, err)
	}
	return nil
}
