package broker

// This file owns one partition's owner goroutine and its produce path; the
// replication driver around the partition's replica core (broker/replica)
// is in partition_repl.go.
//
// Invariant: only the owner goroutine (run) appends to or truncates the
// log, changes the producer state, steps the replica core or raises the
// high watermark.
// Invariant: the high watermark is the core's: everything below it is
// fsynced on min.insync.replicas replicas, the leader included, under the
// current epoch's commit rule, so a consumer never sees a record that a
// crash or a leader change could take back.
// Invariant: a produce reply is sent only once the core releases it: with
// acks=all when the high watermark covers its batch, with acks=1 when the
// leader's own log holds it durably.
// Invariant: every queued or parked produce is answered: a failed write or
// fsync fails the whole group and every parked reply, a leader that loses
// its epoch fails its parked replies with NOT_LEADER_OR_FOLLOWER (the
// producer retries; an idempotent one is deduplicated by the new leader),
// and a request is never queued once the owner has begun its final drain
// (the door, qmu/closed, shuts before the drain).
// Invariant: producer state never runs ahead of the log: a group's
// sequence changes are undone if its append or fsync fails, and a
// truncation rebuilds the state from what the log keeps.
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
	// acksAll: answer once the high watermark covers the batch (acks=-1,
	// every HTTP publish); otherwise once the leader's log holds it durably.
	acksAll bool
	res     chan appendResult // buffered, capacity 1
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
	key    partitionKey
	log    *wal.Log
	logger zerolog.Logger
	m      *metrics
	opts   partitionOptions

	appends chan *appendReq
	qmu     sync.RWMutex // the door: enqueue holds it shared, the final drain exclusively
	closed  bool         // guarded by qmu: no more appends are accepted
	ctl     chan func()
	ticks   chan struct{} // capacity 1: a replication tick is due
	done    chan struct{}
	stop    context.CancelFunc // set by Broker.startPartition before run starts

	// Owned by the run goroutine.
	producers map[int64]*producerState
	rep       *replica.Replica
	parked    map[replica.Token]parkedReply // produce replies the core holds
	nextToken replica.Token
	failed    error // the log's sticky failure, once an append or fsync failed
	// Groups appended but not yet durable, oldest first; each can undo its
	// producer-state changes if the log fails.
	inflight []inflightGroup
	// proposed holds the batches proposed to the core and not yet appended,
	// in offset order (the core hands back offsets, not bytes).
	proposed   [][]byte
	durableSig chan struct{} // capacity 1: the journal raised the durable end or failed
	// fetchWaits are replica fetches waiting for the core's answer (leader).
	fetchWaits map[fetchWaitKey]chan fetchAnswer

	// epoch is the leader epoch this replica leads or follows; connection
	// goroutines read it for Fetch, Metadata and ListOffsets.
	epoch atomic.Int32
	// status is the core's state after the last Ready, for other goroutines.
	status atomic.Pointer[replica.Status]
	// truncations counts truncations, so a read made off the owner
	// goroutine can tell that the log it read may have changed under it.
	truncations atomic.Uint64

	fetchMu   sync.Mutex
	fetchNext *replica.Message // guarded by fetchMu: the fetch the follower core wants sent

	mu     sync.Mutex    // guards hw and hwWait
	hw     wal.Offset    // guarded by mu
	hwWait chan struct{} // guarded by mu; closed and replaced when hw rises
}

// partitionOptions are what a partition needs besides its log.
type partitionOptions struct {
	topic          string
	index          int32
	key            partitionKey
	self           int32            // this broker's node id
	queue          int              // bound of the append queue
	fs             vfs.FS           // for the snapshot file
	snapshotPath   string           // producer-state snapshot file
	producerExpiry time.Duration    // forget idle producers after this
	now            func() time.Time // clock for producer expiry
	metrics        *metrics
	logger         zerolog.Logger
	// minISR is min.insync.replicas: the replicas, the leader included,
	// that must hold a batch for acks=all (0: a majority).
	minISR int
	// soleReplica: the partition has this one replica, so everything its
	// recovered, synced log holds is committed (on a quorum of one).
	soleReplica bool
	// net carries the core's messages to other brokers and the
	// controller. Nil makes a standalone partition that elects itself the
	// leader of a one-replica group at open (unit tests).
	net replicaNet
}

// replicaNet is how a partition's replica reaches the rest of the cluster.
type replicaNet interface {
	// sendToController queues a message for the controller; never blocks.
	sendToController(env envelope)
	// fetchReady tells the follower fetcher of leader that this partition
	// has a fetch to send; never blocks.
	fetchReady(leader int32, p *partition)
}

// openPartition opens (and recovers) the log of one partition and rebuilds
// its producer state. The caller starts run.
func openPartition(l *wal.Log, o partitionOptions) (*partition, error) {
	p := &partition{
		topic:      o.topic,
		index:      o.index,
		key:        o.key,
		log:        l,
		logger:     o.logger,
		m:          o.metrics,
		opts:       o,
		appends:    make(chan *appendReq, o.queue),
		ctl:        make(chan func(), 16),
		ticks:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		producers:  make(map[int64]*producerState),
		parked:     make(map[replica.Token]parkedReply),
		fetchWaits: make(map[fetchWaitKey]chan fetchAnswer),
		hwWait:     make(chan struct{}),
	}
	// What recovery kept is on disk but not necessarily synced: sync it before
	// exposing it, so the core starts from a durable log.
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
	var committed wal.Offset // what the log is known to hold committed
	if o.soleReplica || o.net == nil {
		committed = end
	}
	p.rep = replica.New(replica.Config{
		ID:               replica.NodeID(o.self),
		MinISR:           o.minISR,
		LagTicks:         replicaLagTicks,
		FetchWaitTicks:   replicaFetchWaitTicks,
		RetryTicks:       replicaRetryTicks,
		UnreachableTicks: replicaUnreachableTicks,
		ElideEpochStart:  true,
	}, replica.HardState{Fenced: l.FencedEpoch()}, coreEpochs(l.Epochs()), end, committed)
	p.hw = committed
	p.publishStatus()
	if o.net == nil {
		p.electSelf()
	}
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
			p.failFetchWaits()
			if err := p.writeSnapshot(); err != nil {
				p.logger.Error().Err(err).Msg("write producer snapshot at shutdown")
			}
			return
		case fn := <-p.ctl:
			fn()
		case <-p.ticks:
			p.rep.Tick()
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
		p.handleReady()
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

// appendGroup proposes every batch of the group to the core, which assigns
// their offsets; handleReady then appends them with one write and the
// journal (or an inline fsync) makes them durable. Replies wait in the core
// until it releases them; rejected batches are answered at once. Producer
// sequences are settled before the write (later batches of a producer in
// the group depend on earlier ones) and undone if the write or the fsync
// fails.
func (p *partition) appendGroup(group []*appendReq) {
	var undo producerUndo // stays nil for groups without idempotent producers
	var end wal.Offset = -1
	start := p.log.StartOffset()
	for _, r := range group {
		delta := wal.Offset(r.hdr.LastOffsetDelta)
		dupBase, dup, err := p.checkSequence(r.hdr)
		if err == nil && p.failed != nil {
			err = p.failed
		}
		switch {
		case err != nil:
			r.res <- appendResult{err: err, logStart: start}
			continue
		case dup:
			// A retry waits for its original, which may not be committed yet.
			p.park(r, appendResult{base: dupBase, dup: true, logStart: start}, dupBase+delta+1)
			continue
		}
		base, err := p.rep.Propose(int(delta)+1, nil)
		if err != nil {
			r.res <- appendResult{err: replicaError(err), logStart: start}
			continue
		}
		undo.save(p.producers, r.hdr.ProducerID)
		p.recordProducer(r.hdr, base, base+delta)
		p.proposed = append(p.proposed, r.batch)
		end = base + delta + 1
		p.park(r, appendResult{base: base, logStart: start}, end)
	}
	if end >= 0 {
		p.inflight = append(p.inflight, inflightGroup{end: end, undo: undo})
	}
}

// park hands a reply to the core, to be released when end is committed (or
// durable on the leader, for acks=1).
func (p *partition) park(r *appendReq, res appendResult, end wal.Offset) {
	p.nextToken++
	p.parked[p.nextToken] = parkedReply{res: r.res, result: res}
	p.rep.Wait(end, p.nextToken, r.acksAll)
}

// failLog records the log's failure: producer state goes back to what is
// durable, the core stops, and every parked reply is failed.
func (p *partition) failLog(err error) {
	if p.failed != nil {
		return
	}
	for i := len(p.inflight) - 1; i >= 0; i-- {
		p.inflight[i].undo.restore(p.producers)
	}
	p.inflight = nil
	p.proposed = nil
	p.failed = fmt.Errorf("%w: %s-%d: %w", errStorage, p.topic, p.index, err)
	p.logger.Error().Err(err).Msg("log failed; the partition refuses appends until restarted")
	p.rep.Fail(p.failed)
	p.failParked(p.failed)
}

// onDurable takes in what the journal made durable.
func (p *partition) onDurable() {
	if err := p.log.Failed(); err != nil {
		p.failLog(err)
		return
	}
	p.durable(p.log.DurableEnd())
}

// durable settles the in-flight groups end covers and tells the core.
func (p *partition) durable(end wal.Offset) {
	n := 0
	for n < len(p.inflight) && p.inflight[n].end <= end {
		n++
	}
	p.inflight = p.inflight[n:]
	p.rep.Durable(end)
}

// settleInflight waits until everything appended is durable (or failed),
// so that what follows (a producer snapshot, retention, shutdown) sees no
// producer state ahead of the log's durable end.
func (p *partition) settleInflight() {
	if p.log.DurableEnd() >= p.log.EndOffset() {
		return
	}
	end, err := p.log.Sync()
	if err != nil {
		p.failLog(err)
		return
	}
	p.durable(end)
	p.handleReady()
}

// release answers the replies the core let go.
func (p *partition) release(tokens []replica.Token) {
	for _, t := range tokens {
		pr, ok := p.parked[t]
		if !ok {
			continue
		}
		delete(p.parked, t)
		pr.res <- pr.result
	}
}

// failTokens answers the replies the core gave up on.
func (p *partition) failTokens(failed []replica.TokenErr) {
	for _, f := range failed {
		pr, ok := p.parked[f.Token]
		if !ok {
			continue
		}
		delete(p.parked, f.Token)
		pr.result.err, pr.result.dup = replicaError(f.Err), false
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
