package partition

// This file owns the replication of the log start: the leader tells its
// replica core where its log starts (so the core refuses fetches below it
// and computes the low watermark), DeleteRecords waits until every in-sync
// replica has moved its start (the low watermark), a follower adopts its
// leader's log start from the fetch answers, and a follower left below its
// leader's log start empties its log and restarts at the leader's start.
//
// Invariant: the log start never passes the high watermark, on a follower
// too (FollowLogStart moves it at most to the follower's high watermark).
// Invariant: the core's log start is brought up to date before every
// replica fetch it judges (syncCoreLogStart, on the owner goroutine).
//
// Everything here runs on the owner goroutine, except FollowLogStart,
// LowWatermark and StopAndRestartAt, which hand work to it or run after it
// stopped.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/replica"
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

// awaitLowWatermark parks a wait until every in-sync replica has moved its
// log start to at least start; the reply arrives on the returned channel
// (the owner never blocks on it).
func (p *Partition) awaitLowWatermark(start wal.Offset) <-chan AppendResult {
	ch := make(chan AppendResult, 1)
	p.nextToken++
	p.parked[p.nextToken] = parkedReply{res: ch, result: AppendResult{Base: start}, acksAll: true}
	p.rep.WaitLowWatermark(start, p.nextToken)
	return ch
}

// LowWatermark is the lowest log start among the in-sync replicas, the
// leader included (Kafka's low watermark); on a follower, its own log
// start.
func (p *Partition) LowWatermark() (wal.Offset, error) {
	var lw wal.Offset
	if !p.onOwner(func() {
		p.syncCoreLogStart()
		lw = p.rep.LowWatermark()
	}) {
		return 0, ErrShuttingDown
	}
	return lw, nil
}

// FollowLogStart moves a follower's log start towards its leader's, as far
// as its own high watermark: a start the leader moved (DeleteRecords,
// retention) moves on every replica, so the deleted records stay deleted
// whichever replica leads next. Its next fetch reports the new start. False
// as for Step.
//
// The fetcher calls it before it steps the answer that carried the start:
// the follower's high watermark may rise with that answer, and before it
// does the log start must have moved as far (followLeaderStart, from the
// driver), or a consumer could read, between the two, records below the
// leader's log start that this replica holds and no leader can vouch for
// (a divergent tail the leader's trimmed epoch chain could not detect).
func (p *Partition) FollowLogStart(leaderStart wal.Offset) bool {
	return p.send(func() {
		p.leaderStart = max(p.leaderStart, leaderStart)
		hw, _ := p.HighWatermark()
		p.followLeaderStart(hw)
	})
}

// followLeaderStart moves a follower's log start to its leader's last known
// one, as far as hw and its log end. It runs on the owner goroutine, also
// before a new high watermark is published.
func (p *Partition) followLeaderStart(hw wal.Offset) {
	if p.failed != nil || p.rep.Status().Role != replica.RoleFollower {
		return
	}
	to := min(p.leaderStart, hw, p.log.EndOffset())
	if to <= p.log.StartOffset() {
		return
	}
	start, err := p.log.AdvanceStart(to)
	if err != nil {
		p.failLog(fmt.Errorf("follow the leader's log start %d: %w", to, err))
		return
	}
	p.logger.Info().Int64("log_start", int64(start)).Msg("log start moved with the leader's")
	p.syncCoreLogStart()
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
	err := p.log.TruncateFullyAndStartAt(off, wal.EpochEntry{Epoch: wal.UndefinedEpoch})
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

// waitDeleted waits for the low-watermark wait of a DeleteRecords.
func waitDeleted(ctx context.Context, done <-chan struct{}, ch <-chan AppendResult) error {
	select {
	case r := <-ch:
		return r.Err
	case <-done:
		select {
		case r := <-ch:
			return r.Err
		default:
			return ErrShuttingDown
		}
	case <-ctx.Done():
		return fmt.Errorf("wait for the in-sync replicas to delete: %w", ctx.Err())
	}
}
