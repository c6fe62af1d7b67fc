package broker

// This file owns one partition's owner goroutine.
//
// Invariant: only the owner goroutine (run) appends to the log, changes the
// producer state or raises the high watermark.
// Invariant: the high watermark never exceeds the log's durable end, so a
// consumer never sees a record that a crash could take back.
// Invariant: a produce reply is sent only once the high watermark covers its
// batch (partition_core.go), which on a lone broker is right after the fsync.
// Invariant: every queued or parked produce is answered: a failed write or
// fsync fails the whole group and every parked reply the high watermark can
// no longer reach, and a request is never queued once the owner has begun
// its final drain (the door, qmu/closed, shuts before the drain).
// Invariant: producer state never runs ahead of durability: a group's
// sequence changes are undone unless its append and fsync succeed.
//
// The high watermark and its change notification are guarded by mu, so
// Fetch long polls on other goroutines can wait on it.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// maxGroupCommit bounds how many queued batches share one fsync.
const maxGroupCommit = 256

type appendReq struct {
	batch []byte
	hdr   wal.BatchHeader
	res   chan appendResult // buffered, capacity 1
}

type inflightGroup struct {
	end  wal.Offset // the log end after the group
	undo producerUndo
}

type parkedReply struct {
	res    chan appendResult
	result appendResult
}

type appendResult struct {
	base     wal.Offset
	logStart wal.Offset
	dup      bool // an idempotent retry: base is the original offset
	err      error
}

type partition struct {
	topic  string
	index  int32
	log    *wal.Log
	logger zerolog.Logger
	m      *metrics
	opts   partitionOptions

	appends chan *appendReq
	qmu     sync.RWMutex // the door: enqueue holds it shared, the final drain exclusively
	closed  bool         // guarded by qmu: no more appends are accepted
	ctl     chan func()
	done    chan struct{}
	stop    context.CancelFunc // set by Broker.startPartition before run starts

	// Owned by the run goroutine.
	producers map[int64]*producerState
	self      int32 // this broker's replica id
	core      *core
	parked    map[int]parkedReply // produce replies the core holds, by token
	nextToken int
	failed    error // the log's sticky failure, once an append or fsync failed
	// With a journaled log, groups appended but not yet durable, oldest
	// first; each can undo its producer-state changes if the journal fails.
	inflight   []inflightGroup
	durableSig chan struct{} // capacity 1: the journal raised the durable end or failed

	// epoch is the partition's leader epoch. Only the owner writes it (the
	// replication of DESIGN.md §4 will, on a leader change); connection
	// goroutines read it for Fetch, Metadata and ListOffsets.
	epoch atomic.Int32

	mu     sync.Mutex    // guards hw and hwWait
	hw     wal.Offset    // guarded by mu
	hwWait chan struct{} // guarded by mu; closed and replaced when hw rises
}

// partitionOptions are what a partition needs besides its log.
type partitionOptions struct {
	topic          string
	index          int32
	self           int32            // this broker's node id
	queue          int              // bound of the append queue
	fs             vfs.FS           // for the snapshot file
	snapshotPath   string           // producer-state snapshot file
	producerExpiry time.Duration    // forget idle producers after this
	now            func() time.Time // clock for producer expiry
	metrics        *metrics
	logger         zerolog.Logger
}

// openPartition opens (and recovers) the log of one partition and rebuilds
// its producer state. The caller starts run.
func openPartition(l *wal.Log, o partitionOptions) (*partition, error) {
	p := &partition{
		topic:     o.topic,
		index:     o.index,
		log:       l,
		logger:    o.logger,
		m:         o.metrics,
		opts:      o,
		appends:   make(chan *appendReq, o.queue),
		ctl:       make(chan func(), 16),
		done:      make(chan struct{}),
		producers: make(map[int64]*producerState),
		hwWait:    make(chan struct{}),
	}
	// What recovery kept is on disk but not necessarily synced: sync it before
	// exposing it, so the first high watermark is durable.
	end, err := l.Sync()
	if err != nil {
		return nil, fmt.Errorf("broker: sync recovered log of %s-%d: %w", p.topic, p.index, err)
	}
	if err := p.rebuildProducers(); err != nil {
		return nil, err
	}
	if l.Journaled() {
		p.durableSig = make(chan struct{}, 1)
		l.SetDurableHook(func() {
			select {
			case p.durableSig <- struct{}{}:
			default: // a wake-up is pending; it will read the newest state
			}
		})
	}
	p.hw = end
	p.self = o.self
	p.core = newCore([]int32{o.self}, 0, end)
	p.parked = make(map[int]parkedReply)
	return p, nil
}

// highWatermark returns the current high watermark and a channel closed when
// it next rises.
func (p *partition) highWatermark() (wal.Offset, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw, p.hwWait
}

func (p *partition) setHighWatermark(hw wal.Offset) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.hw {
		return
	}
	p.hw = hw
	close(p.hwWait)
	p.hwWait = make(chan struct{})
}

// run is the owner loop. It returns when ctx ends; queued appends are failed.
func (p *partition) run(ctx context.Context) {
	defer close(p.done)
	group := make([]*appendReq, 0, maxGroupCommit)
	for {
		select {
		case <-ctx.Done():
			p.qmu.Lock()
			p.closed = true
			p.qmu.Unlock()
			p.failQueued()
			p.settleInflight()
			p.failParked(errShuttingDown)
			if err := p.writeSnapshot(); err != nil {
				p.logger.Error().Err(err).Msg("write producer snapshot at shutdown")
			}
			return
		case fn := <-p.ctl:
			fn()
		case <-p.durableSig:
			p.onDurable()
		case r := <-p.appends:
			group = append(group[:0], r)
		drain:
			for len(group) < maxGroupCommit {
				select {
				case r := <-p.appends:
					group = append(group, r)
				default:
					break drain
				}
			}
			p.appendGroup(group)
			clear(group)
		}
	}
}

// failParked answers every parked reply with err.
func (p *partition) failParked(err error) {
	for t, pr := range p.parked {
		delete(p.parked, t)
		pr.result.err = err
		pr.result.dup = false
		pr.res <- pr.result
	}
}

func (p *partition) failQueued() {
	for {
		select {
		case r := <-p.appends:
			r.res <- appendResult{err: errShuttingDown}
		default:
			return
		}
	}
}

// appendGroup appends every batch of the group with one write and one
// fsync. Replies wait in the core until the high watermark covers their
// batches; rejected batches are answered at once. Producer sequences are
// settled before the write (later batches of a producer in the group depend
// on earlier ones) and undone if the write or the fsync fails.
func (p *partition) appendGroup(group []*appendReq) {
	results := make([]appendResult, len(group))
	ends := make([]wal.Offset, len(group)) // 0: answer now
	batches := make([][]byte, 0, len(group))
	accepted := make([]int, 0, len(group))
	var undo producerUndo // stays nil for groups without idempotent producers
	next := p.log.EndOffset()
	for i, r := range group {
		dupBase, dup, err := p.checkSequence(r.hdr)
		switch {
		case err != nil:
			results[i].err = err
			continue
		case dup:
			// A retry waits for its original, which may not be committed yet.
			results[i].base, results[i].dup = dupBase, true
			ends[i] = dupBase + wal.Offset(r.hdr.LastOffsetDelta) + 1
			continue
		}
		// Batches were validated (CRC included) before they were queued, so
		// the wal assigns exactly these offsets; the producer state of a
		// batch later in the group depends on it.
		undo.save(p.producers, r.hdr.ProducerID)
		p.recordProducer(r.hdr, next, next+wal.Offset(r.hdr.LastOffsetDelta))
		next += wal.Offset(r.hdr.LastOffsetDelta) + 1
		batches = append(batches, r.batch)
		accepted = append(accepted, i)
	}
	var syncErr error
	if len(batches) > 0 {
		appended, failedAppend := false, false
		for j, res := range p.log.AppendGroup(batches, p.leaderEpoch()) {
			i := accepted[j]
			if res.Err != nil {
				results[i].err = fmt.Errorf("%w: append to %s-%d: %w", errStorage, p.topic, p.index, res.Err)
				p.logger.Error().Err(res.Err).Msg("append failed")
				failedAppend = true
				continue
			}
			results[i].base = res.Base
			ends[i] = res.Last + 1
			appended = true
		}
		if p.log.Journaled() {
			// The journal's round will make the group durable; the owner
			// goes on with the next group meanwhile (onDurable).
			if failedAppend {
				syncErr = p.log.Failed()
				p.settleProducers(group, accepted, results, undo, syncErr == nil)
			}
			if syncErr == nil && appended {
				p.inflight = append(p.inflight, inflightGroup{end: p.log.EndOffset(), undo: undo})
			}
			p.answer(group, results, ends, syncErr)
			return
		}
		// After a failed append the sync reports whether the failure is the
		// log's (sticky) or the batch's alone.
		if appended || failedAppend {
			timer := p.m.startFsync()
			var end wal.Offset
			end, syncErr = p.log.Sync()
			timer()
			if syncErr != nil {
				p.logger.Error().Err(syncErr).Msg("fsync failed; the partition refuses appends until restarted")
			} else if hw, rose, released := p.core.durableEnd(p.self, end); rose {
				p.setHighWatermark(hw)
				p.release(released)
			}
		}
		if syncErr != nil || failedAppend {
			p.settleProducers(group, accepted, results, undo, syncErr == nil)
		}
	}
	p.answer(group, results, ends, syncErr)
}

// settleProducers makes the producer state match what the log durably
// holds after a group that did not wholly succeed: it undoes the group's
// changes and, if the fsync succeeded, records again the batches that were
// appended.
func (p *partition) settleProducers(group []*appendReq, accepted []int, results []appendResult, undo producerUndo, synced bool) {
	undo.restore(p.producers)
	if !synced {
		return
	}
	for _, i := range accepted {
		if results[i].err == nil {
			h := group[i].hdr
			p.recordProducer(h, results[i].base, results[i].base+wal.Offset(h.LastOffsetDelta))
		}
	}
}

// answer sends rejected results at once and parks the others in the core.
func (p *partition) answer(group []*appendReq, results []appendResult, ends []wal.Offset, syncErr error) {
	start := p.log.StartOffset()
	if syncErr != nil {
		p.failLog(syncErr)
	}
	for i, r := range group {
		results[i].logStart = start
		if p.failed != nil && results[i].err == nil && ends[i] > p.core.hw {
			// A fresh batch that was not made durable, or a retry of one
			// that never will be.
			results[i].err, results[i].dup = p.failed, false
		}
		if results[i].err != nil || ends[i] == 0 {
			r.res <- results[i]
			continue
		}
		p.nextToken++
		p.parked[p.nextToken] = parkedReply{res: r.res, result: results[i]}
		if p.core.wait(ends[i], p.nextToken) {
			p.release([]int{p.nextToken})
		}
	}
}

// failLog records the log's failure: producer state goes back to what is
// durable, and every parked reply is failed, because the high watermark
// cannot rise past the failed log's durable end.
func (p *partition) failLog(err error) {
	if p.failed != nil {
		return
	}
	for i := len(p.inflight) - 1; i >= 0; i-- {
		p.inflight[i].undo.restore(p.producers)
	}
	p.inflight = nil
	p.failed = fmt.Errorf("%w: sync %s-%d: %w", errStorage, p.topic, p.index, err)
	p.failParked(p.failed)
}

// onDurable takes in what the journal made durable: in-flight groups it
// covers are settled, and the high watermark rises, releasing replies.
func (p *partition) onDurable() {
	if err := p.log.Failed(); err != nil {
		p.failLog(err)
		return
	}
	end := p.log.DurableEnd()
	n := 0
	for n < len(p.inflight) && p.inflight[n].end <= end {
		n++
	}
	p.inflight = p.inflight[n:]
	if hw, rose, released := p.core.durableEnd(p.self, end); rose {
		p.setHighWatermark(hw)
		p.release(released)
	}
}

// settleInflight waits until the journal has made every appended group
// durable (or failed), so that what follows (a producer snapshot, retention,
// shutdown) sees no producer state ahead of the log's durable end.
func (p *partition) settleInflight() {
	if len(p.inflight) == 0 {
		return
	}
	if _, err := p.log.Sync(); err != nil {
		p.logger.Error().Err(err).Msg("journal sync failed")
	}
	p.onDurable()
}

// release answers the replies the core let go.
func (p *partition) release(tokens []int) {
	for _, t := range tokens {
		pr, ok := p.parked[t]
		if !ok {
			continue
		}
		delete(p.parked, t)
		pr.res <- pr.result
	}
}

// enqueue hands a batch to the owner; the reply arrives on r.res. It fails
// fast with errBackpressure when the queue is full.
func (p *partition) enqueue(r *appendReq) error {
	p.qmu.RLock()
	defer p.qmu.RUnlock()
	if p.closed {
		return errShuttingDown
	}
	select {
	case p.appends <- r:
		return nil
	default:
		return errBackpressure
	}
}

// maintain asks the owner to roll aged segments and apply retention. It never
// blocks: a partition that is busy is maintained on the next tick.
func (p *partition) maintain() {
	select {
	case p.ctl <- func() {
		// The snapshot is written before retention deletes the segments it
		// replaces, so a crash in between cannot leave a snapshot older than
		// the log start (the producers' next batches would then look like
		// sequence gaps). If it cannot be written, nothing is deleted.
		p.settleInflight()
		p.expireProducers()
		if err := p.writeSnapshot(); err != nil {
			p.logger.Error().Err(err).Msg("write producer snapshot; retention postponed")
			return
		}
		if n, err := p.log.Maintain(); err != nil {
			p.logger.Error().Err(err).Msg("retention failed")
		} else if n > 0 {
			p.logger.Info().Int("segments", n).Int64("log_start", int64(p.log.StartOffset())).Msg("retention deleted segments")
		}
	}:
	default:
	}
}

// reconfigure applies new topic settings on the owner goroutine.
func (p *partition) reconfigure(cfg wal.Config) {
	done := make(chan struct{})
	select {
	case p.ctl <- func() {
		defer close(done)
		if err := p.log.SetConfig(cfg); err != nil {
			p.logger.Error().Err(err).Msg("apply topic config")
		}
	}:
		select {
		case <-done:
		case <-p.done:
		}
	case <-p.done:
	}
}

// stopAndClose stops the owner and closes the log; the caller removes the
// partition's directories.
func (p *partition) stopAndClose() {
	p.stop()
	<-p.done
	if err := p.log.Close(); err != nil {
		p.logger.Warn().Err(err).Msg("close log of a deleted partition")
	}
}

// leaderEpoch is the partition's current leader epoch; any goroutine may call it.
func (p *partition) leaderEpoch() wal.Epoch { return wal.Epoch(p.epoch.Load()) }

// position classifies a consumer's fetch offset against the log: below the
// log start or past the log end it is out of range; at or above the high
// watermark (up to the log end, where a record may be appended but not yet
// committed) there is nothing to read yet, and the caller waits on the
// returned channel; below it there is data. Kafka answers an offset between
// the high watermark and the log end the same way: with an empty fetch, not
// an error, so consumers are not reset after a leader change.
func (p *partition) position(from wal.Offset) (hw wal.Offset, wait <-chan struct{}, err error) {
	hw, changed := p.highWatermark()
	start, end := p.log.StartOffset(), max(p.log.EndOffset(), hw)
	switch {
	case from < start || from > end:
		return hw, nil, fmt.Errorf("%w: offset %d outside [%d, %d] of %s-%d", wal.ErrOffsetOutOfRange, from, start, end, p.topic, p.index)
	case from >= hw:
		return hw, changed, nil
	}
	return hw, nil, nil
}

// read returns whole batches from offset, up to the high watermark.
func (p *partition) read(from wal.Offset, maxBytes int) ([]byte, wal.Offset, error) {
	hw, wait, err := p.position(from)
	if err != nil || wait != nil {
		return nil, hw, err
	}
	b, err := p.log.Read(from, hw, maxBytes)
	return b, hw, err
}

// step hands the partition's replica one message from another broker or
// the controller, on the owner goroutine. It reports false if the owner has
// stopped or is too busy to take it now (the sender retries).
func (p *partition) step(m replica.Message) bool {
	_ = m
	return false
}
