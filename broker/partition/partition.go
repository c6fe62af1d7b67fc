package partition

// This file owns the Partition: its owner goroutine (Run) and its produce
// path, its high watermark, and the requests other goroutines make of it.
// It keeps doc.go's invariants on the owner, the high watermark, produce
// replies, the final drain, the producer state and the log start.
//
// The owner goroutine (Run) owns every field marked so below. Other
// goroutines reach it through the bounded channels appends (Enqueue) and
// ctl (send), or read what it publishes: the high watermark under mu, the
// leader epoch, status and truncation count as atomics, the follower's next
// fetch under fetchMu.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/hotkeys"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// maxGroupCommit bounds how many queued batches share one fsync.
const maxGroupCommit = 256

// AppendRequest is one batch for the owner to append; make it with
// NewAppendRequest and hand it over with Enqueue.
type AppendRequest struct {
	batch []byte
	hdr   wal.BatchHeader
	// acksAll: answer once the high watermark covers the batch (acks=-1,
	// every HTTP publish); otherwise once the leader's log holds it durably.
	acksAll bool
	// notAfter: when not zero, the batch is refused (ErrAppendTooLate)
	// if the owner takes it up later, by the partition's clock.
	notAfter time.Time
	res      chan AppendResult // buffered, capacity 1: the owner never blocks on it
}

// NewAppendRequest prepares batch, whose header the caller parsed and
// checked, for Enqueue. With acksAll the reply waits until the high
// watermark covers the batch (acks=-1); otherwise until the leader's own
// log holds it durably (acks=1).
func NewAppendRequest(batch []byte, hdr wal.BatchHeader, acksAll bool) *AppendRequest {
	return &AppendRequest{batch: batch, hdr: hdr, acksAll: acksAll, res: make(chan AppendResult, 1)}
}

// NotAfter has the batch refused, never appended, if the partition takes
// it up after t (zero: no limit). A batch whose large-object references
// were claimed must reach the log within a bound of its claim, or never:
// the reference ledger closes an open claim at the log end after it
// (tier/doc.go, "Large objects").
func (r *AppendRequest) NotAfter(t time.Time) *AppendRequest {
	r.notAfter = t
	return r
}

// Header is the batch's header, as given to NewAppendRequest.
func (r *AppendRequest) Header() wal.BatchHeader { return r.hdr }

// Result delivers the one reply to an enqueued request.
func (r *AppendRequest) Result() <-chan AppendResult { return r.res }

type inflightGroup struct {
	end  wal.Offset // the log end after the group
	undo producerUndo
}

type parkedReply struct {
	res     chan AppendResult
	result  AppendResult
	acksAll bool
}

// AppendResult is the reply to an AppendRequest.
type AppendResult struct {
	Base     wal.Offset // the batch's first offset
	LogStart wal.Offset // the log start when the batch was taken in
	Dup      bool       // an idempotent retry: Base is the original's offset
	Err      error
}

// Partition is one replica of one partition on this broker: its log, the
// owner goroutine that alone writes it, its producer state and the driver
// of its replica core.
type Partition struct {
	topic  string
	index  int32
	log    *wal.Log
	logger zerolog.Logger
	m      Metrics
	opts   Options

	appends chan *AppendRequest
	qmu     sync.RWMutex // the door: Enqueue holds it shared, the final drain exclusively
	closed  bool         // guarded by qmu: no more appends are accepted
	ctl     chan func()
	ticks   chan struct{} // capacity 1: a replication tick is due
	done    chan struct{} // closed when Run returns
	quit    chan struct{} // closed by StopAndClose: Run stops as if its ctx ended
	quitOne sync.Once

	// Owned by the owner goroutine (Run).
	producers map[int64]*producerState
	// snapWritten: the bytes of the producer snapshot this run last wrote
	// durably (nil: none, or unknown after a failed write); owner only.
	snapWritten []byte
	rep         *replica.Replica
	parked      map[replica.Token]parkedReply // produce replies the core holds
	nextToken   replica.Token
	failed      error // the log's sticky failure, once an append or fsync failed
	// leaderStart is the highest log start a leader's answer named, which a
	// follower's own start follows up to its high watermark (logstart.go).
	leaderStart wal.Offset
	// Groups appended but not yet durable, oldest first; each can undo its
	// producer-state changes if the log fails.
	inflight []inflightGroup
	// proposed holds the batches proposed to the core and not yet appended,
	// in offset order (the core hands back offsets, not bytes).
	proposed   [][]byte
	durableSig chan struct{} // capacity 1: the journal raised the durable end or failed
	// fetchWaits are replica fetches waiting for the core's answer (leader).
	fetchWaits map[fetchWaitKey]chan FetchAnswer

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

	ingress hotkeys.Meter // its own lock: what Enqueue accepted (ingress.go)

	mu     sync.Mutex    // guards hw and hwWait
	hw     wal.Offset    // guarded by mu
	hwWait chan struct{} // guarded by mu; closed and replaced when hw rises
}

// Options are what a partition needs besides its log.
type Options struct {
	Topic          string
	Index          int32
	TopicID        [16]byte
	Self           int32            // this broker's node id
	Queue          int              // bound of the append queue
	FS             vfs.FS           // for the snapshot file
	SnapshotPath   string           // producer-state snapshot file; "" keeps none
	ProducerExpiry time.Duration    // forget idle producers after this
	Now            func() time.Time // clock for producer expiry and epoch-start batches
	Metrics        Metrics          // nil: none
	Logger         zerolog.Logger
	// MinISR is min.insync.replicas: the replicas, the leader included,
	// that must hold a batch for acks=all (0: a majority).
	MinISR int
	// SoleReplica: the partition has this one replica, so everything its
	// recovered, synced log holds is committed (on a quorum of one).
	SoleReplica bool
	// Net carries the core's messages to other brokers and the
	// controller. Nil makes a standalone partition that elects itself the
	// leader of a one-replica group at open (unit tests).
	Net Net

	// Incarnation of the data directory the log lives in, stamped on the
	// replica's messages (replica.Config.Incarnation); 0: unknown.
	Incarnation replica.Incarnation
}

// Net is how a partition's replica reaches the rest of the cluster.
type Net interface {
	// SendToController queues a message of this partition's core for the
	// controller; never blocks.
	SendToController(m replica.Message)
	// FetchReady tells the follower fetcher of leader that p has a fetch
	// to send (TakeFetch); never blocks.
	FetchReady(leader int32, p *Partition)
	// LeaseHeld reports whether this broker surely still holds its
	// registration lease, so no other leader can have been elected for an
	// epoch it leads. An acks=1 reply is sent only while it does: a
	// leader paused or cut off past its lease may hold a batch the new
	// leader never saw.
	LeaseHeld() bool
}

// Metrics is what a partition reports.
type Metrics interface {
	// StartFsync starts timing one fsync; the partition calls the result
	// when it ends.
	StartFsync() func()
}

type noMetrics struct{}

func (noMetrics) StartFsync() func() { return func() {} }

// Open opens the partition on l, its recovered log: it syncs what recovery
// kept and rebuilds the producer state. The caller runs Run, and closes l
// if Open fails.
func Open(l *wal.Log, o Options) (*Partition, error) {
	p := &Partition{
		topic:      o.Topic,
		index:      o.Index,
		log:        l,
		logger:     o.Logger,
		m:          o.Metrics,
		opts:       o,
		appends:    make(chan *AppendRequest, o.Queue),
		ctl:        make(chan func(), 16),
		ticks:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		quit:       make(chan struct{}),
		producers:  make(map[int64]*producerState),
		parked:     make(map[replica.Token]parkedReply),
		fetchWaits: make(map[fetchWaitKey]chan FetchAnswer),
		hwWait:     make(chan struct{}),
	}
	if p.m == nil {
		p.m = noMetrics{}
	}
	// What recovery kept is on disk but not necessarily synced: sync it before
	// exposing it, so the core starts from a durable log.
	end, err := l.Sync()
	if err != nil {
		return nil, fmt.Errorf("partition: sync recovered log of %s-%d: %w", p.topic, p.index, err)
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
	if o.SoleReplica || o.Net == nil {
		committed = end
	}
	p.rep = replica.New(replica.Config{
		ID:               replica.NodeID(o.Self),
		MinISR:           o.MinISR,
		LagTicks:         replicaLagTicks,
		FetchWaitTicks:   replicaFetchWaitTicks,
		RetryTicks:       replicaRetryTicks,
		UnreachableTicks: replicaUnreachableTicks,
		ElideEpochStart:  true,
		Incarnation:      o.Incarnation,
	}, replica.HardState{Fenced: l.FencedEpoch()}, coreEpochs(l.Epochs()), end, committed)
	p.hw = committed
	p.publishStatus()
	if o.Net == nil {
		p.electSelf()
	}
	return p, nil
}

// Topic is the partition's topic name.
func (p *Partition) Topic() string { return p.topic }

// Index is the partition's number in its topic.
func (p *Partition) Index() int32 { return p.index }

// TopicID is the ID of the partition's topic.
func (p *Partition) TopicID() [16]byte { return p.opts.TopicID }

// Log is the partition's log. Any goroutine may read it (below the high
// watermark for consumers) or close it once Run has returned; only the
// owner writes it.
func (p *Partition) Log() *wal.Log { return p.log }

// HighWatermark returns the current high watermark and a channel closed when
// it next rises. Any goroutine may call it.
func (p *Partition) HighWatermark() (wal.Offset, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw, p.hwWait
}

func (p *Partition) setHighWatermark(hw wal.Offset) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.hw {
		return
	}
	p.hw = hw
	close(p.hwWait)
	p.hwWait = make(chan struct{})
}

// Run is the owner loop. It returns when ctx ends or StopAndClose is
// called; queued appends are failed, parked replies answered, and the
// producer snapshot written. Call it once.
func (p *Partition) Run(ctx context.Context) {
	defer close(p.done)
	group := make([]*AppendRequest, 0, maxGroupCommit)
	for {
		select {
		case <-ctx.Done():
			p.shutdown()
			return
		case <-p.quit:
			p.shutdown()
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

// shutdown shuts the door to appends and answers everything queued,
// parked or waiting; the owner then stops.
func (p *Partition) shutdown() {
	p.qmu.Lock()
	p.closed = true
	p.qmu.Unlock()
	p.failQueued()
	p.settleInflight()
	p.failParked(ErrShuttingDown)
	p.failFetchWaits()
	if err := p.writeSnapshot(); err != nil {
		p.logger.Error().Err(err).Msg("write producer snapshot at shutdown")
	}
}

// failParked answers every parked reply with err.
func (p *Partition) failParked(err error) {
	for t, pr := range p.parked {
		delete(p.parked, t)
		pr.result.Err = err
		pr.result.Dup = false
		pr.res <- pr.result
	}
}

func (p *Partition) failQueued() {
	for {
		select {
		case r := <-p.appends:
			r.res <- AppendResult{Err: ErrShuttingDown}
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
func (p *Partition) appendGroup(group []*AppendRequest) {
	var undo producerUndo // stays nil for groups without idempotent producers
	var end wal.Offset = -1
	start := p.log.StartOffset()
	refusal := NotAppended(p.appendRefusal()) // before any sequence check (producer.go)
	for _, r := range group {
		delta := wal.Offset(r.hdr.LastOffsetDelta)
		var dupBase wal.Offset
		var dup bool
		err := refusal
		if err == nil && !r.notAfter.IsZero() && p.clock().After(r.notAfter) {
			err = fmt.Errorf("%w: %s-%d: due by %s", ErrAppendTooLate, p.topic, p.index, r.notAfter.UTC().Format(time.RFC3339Nano))
		}
		if err == nil {
			dupBase, dup, err = p.checkSequence(r.hdr)
		}
		switch {
		case err != nil:
			r.res <- AppendResult{Err: err, LogStart: start}
			continue
		case dup:
			// A retry waits for its original, which may not be committed yet.
			p.park(r, AppendResult{Base: dupBase, Dup: true, LogStart: start}, dupBase+delta+1)
			continue
		}
		base, err := p.rep.Propose(int(delta)+1, nil)
		if err != nil {
			r.res <- AppendResult{Err: replicaError(err), LogStart: start}
			continue
		}
		undo.save(p.producers, r.hdr.ProducerID)
		p.recordProducer(r.hdr, base, base+delta)
		p.proposed = append(p.proposed, r.batch)
		end = base + delta + 1
		p.park(r, AppendResult{Base: base, LogStart: start}, end)
	}
	if end >= 0 {
		p.inflight = append(p.inflight, inflightGroup{end: end, undo: undo})
	}
}

// park hands a reply to the core, to be released when end is committed (or
// durable on the leader, for acks=1).
func (p *Partition) park(r *AppendRequest, res AppendResult, end wal.Offset) {
	p.nextToken++
	p.parked[p.nextToken] = parkedReply{res: r.res, result: res, acksAll: r.acksAll}
	p.rep.Wait(end, p.nextToken, r.acksAll && !plantedAckBeforeQuorum)
}

// failLog records the log's failure: producer state goes back to what is
// durable, the core stops, and every parked reply is failed.
func (p *Partition) failLog(err error) {
	if p.failed != nil {
		return
	}
	for i := len(p.inflight) - 1; i >= 0; i-- {
		p.inflight[i].undo.restore(p.producers)
	}
	p.inflight = nil
	p.proposed = nil
	p.failed = fmt.Errorf("%w: %s-%d: %w", ErrStorage, p.topic, p.index, err)
	p.logger.Error().Err(err).Msg("log failed; the partition refuses appends until restarted")
	p.rep.Fail(p.failed)
	p.failParked(p.failed)
}

// onDurable takes in what the journal made durable.
func (p *Partition) onDurable() {
	if err := p.log.Failed(); err != nil {
		p.failLog(err)
		return
	}
	p.durable(p.log.DurableEnd())
}

// durable settles the in-flight groups end covers and tells the core.
func (p *Partition) durable(end wal.Offset) {
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
func (p *Partition) settleInflight() {
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
func (p *Partition) release(tokens []replica.Token) {
	for _, t := range tokens {
		pr, ok := p.parked[t]
		if !ok {
			continue
		}
		delete(p.parked, t)
		if !pr.acksAll && p.opts.Net != nil && !p.opts.Net.LeaseHeld() {
			// Committed or not, an acks=1 batch is only as safe as the
			// leadership it was written under, which may have passed.
			pr.result.Err, pr.result.Dup = fmt.Errorf("%w: the broker's registration lease may have expired", ErrNotLeader), false
		}
		pr.res <- pr.result
	}
}

// failTokens answers the replies the core gave up on.
func (p *Partition) failTokens(failed []replica.TokenErr) {
	for _, f := range failed {
		pr, ok := p.parked[f.Token]
		if !ok {
			continue
		}
		delete(p.parked, f.Token)
		pr.result.Err, pr.result.Dup = replicaError(f.Err), false
		pr.res <- pr.result
	}
}

// Enqueue hands a batch to the owner; the reply arrives on r.Result(). It
// fails fast with ErrBackpressure when the queue is full, and with
// ErrShuttingDown once the owner has begun its final drain.
func (p *Partition) Enqueue(r *AppendRequest) error {
	p.qmu.RLock()
	defer p.qmu.RUnlock()
	if p.closed {
		return ErrShuttingDown
	}
	select {
	case p.appends <- r:
		p.ingress.ObserveBatch(p.clock(), r.hdr, r.batch) // reads only what the owner never rewrites
		return nil
	default:
		return ErrBackpressure
	}
}

// Maintain asks the owner to roll aged segments and apply retention. It never
// blocks: a partition that is busy is maintained on the next tick.
func (p *Partition) Maintain() {
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

// DeleteLocalBelow deletes the local segments wholly below off, as the
// retention state machine (tier/) decided, on the owner goroutine: the
// producer snapshot is written first, so a crash in between cannot leave a
// snapshot older than the log start. It returns how many segments went.
func (p *Partition) DeleteLocalBelow(off wal.Offset) (int, error) {
	var n int
	var err error
	if !p.onOwner(func() {
		p.settleInflight()
		p.expireProducers()
		if err = p.writeSnapshot(); err != nil {
			err = fmt.Errorf("partition: write producer snapshot, deletion postponed: %w", err)
			return
		}
		if n, err = p.log.DeleteBelow(off); err == nil && n > 0 {
			p.logger.Info().Int("segments", n).Int64("local_start", int64(p.log.StartOffset())).Msg("retention deleted local segments")
		}
	}) {
		return 0, ErrShuttingDown
	}
	return n, err
}

// ProducerSnapshot encodes the producer state as of the log end, in the
// snapshot file's format (doc.go), for an object uploaded to storage.
func (p *Partition) ProducerSnapshot() ([]byte, error) {
	var data []byte
	var err error
	if !p.onOwner(func() { data, err = p.encodeSnapshot() }) {
		return nil, ErrShuttingDown
	}
	return data, err
}

// onOwner runs fn on the owner goroutine and waits for it; false if the
// owner has stopped.
func (p *Partition) onOwner(fn func()) bool {
	done := make(chan struct{})
	select {
	case p.ctl <- func() { defer close(done); fn() }:
	case <-p.done:
		return false
	}
	select {
	case <-done:
		return true
	case <-p.done:
		return false
	}
}

// Reconfigure applies new topic settings on the owner goroutine and waits
// until they are applied or the owner has stopped.
func (p *Partition) Reconfigure(cfg wal.Config) {
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

// StopAndClose stops the owner, waits until Run has returned and closes the
// log; the caller removes the partition's directories. Run must have been
// started.
func (p *Partition) StopAndClose() {
	p.quitOne.Do(func() { close(p.quit) })
	<-p.done
	if err := p.log.Close(); err != nil {
		p.logger.Warn().Err(err).Msg("close log of a deleted partition")
	}
}

// deleteRecordsToHW is the offset that means "up to the high watermark".
const deleteRecordsToHW = -1

// DeleteRecords moves the log start to offset (-1: the high watermark;
// Kafka's DeleteRecords) on the leader and returns once every in-sync
// replica has moved its own that far (the low watermark, which it
// returns): followers adopt the leader's log start from their fetches
// (FollowLogStart), so the records stay deleted whichever replica leads
// next. Only the leader accepts (ErrNotLeader); an offset above the high
// watermark is wal.ErrOffsetOutOfRange. It gives up when ctx ends; the log
// start may have moved on the leader by then.
func (p *Partition) DeleteRecords(ctx context.Context, offset int64) (wal.Offset, error) {
	type result struct {
		start wal.Offset
		wait  <-chan AppendResult
		err   error
	}
	res := make(chan result, 1) // the owner never blocks on a caller that gave up
	work := func() {
		if st := p.rep.Status(); st.Role != replica.RoleLeader {
			res <- result{err: fmt.Errorf("delete records of %s-%d: %w", p.topic, p.index, ErrNotLeader)}
			return
		}
		hw, _ := p.HighWatermark()
		to := wal.Offset(offset)
		if offset == deleteRecordsToHW {
			to = hw
		}
		if to < 0 || to > hw {
			res <- result{err: fmt.Errorf("delete records of %s-%d before %d, high watermark %d: %w", p.topic, p.index, offset, hw, wal.ErrOffsetOutOfRange)}
			return
		}
		start, err := p.log.AdvanceStart(to)
		if err != nil {
			res <- result{err: fmt.Errorf("%w: delete records of %s-%d before %d: %w", ErrStorage, p.topic, p.index, to, err)}
			return
		}
		p.logger.Info().Int64("log_start", int64(start)).Msg("records deleted")
		p.syncCoreLogStart()
		res <- result{start: start, wait: p.awaitLowWatermark(start)}
	}
	select {
	case p.ctl <- work:
	case <-p.done:
		return 0, ErrShuttingDown
	case <-ctx.Done():
		return 0, fmt.Errorf("delete records of %s-%d: owner busy: %w", p.topic, p.index, ctx.Err())
	}
	var r result
	select {
	case r = <-res:
	case <-p.done:
		select {
		case r = <-res:
		default:
			return 0, ErrShuttingDown
		}
	case <-ctx.Done():
		return 0, fmt.Errorf("delete records of %s-%d: %w", p.topic, p.index, ctx.Err())
	}
	if r.err != nil {
		return 0, r.err
	}
	if err := waitDeleted(ctx, p.done, r.wait); err != nil {
		return r.start, fmt.Errorf("delete records of %s-%d before %d: %w", p.topic, p.index, r.start, err)
	}
	lw, err := p.LowWatermark()
	if err != nil {
		return r.start, err
	}
	return max(lw, r.start), nil
}

// LeaderEpoch is the partition's current leader epoch; any goroutine may call it.
func (p *Partition) LeaderEpoch() wal.Epoch { return wal.Epoch(p.epoch.Load()) }

// Position classifies a consumer's fetch offset against the log: below the
// log start or past the log end it is out of range; at or above the high
// watermark (up to the log end, where a record may be appended but not yet
// committed) there is nothing to read yet, and the caller waits on the
// returned channel; below it there is data. Kafka answers an offset between
// the high watermark and the log end the same way: with an empty fetch, not
// an error, so consumers are not reset after a leader change.
func (p *Partition) Position(from wal.Offset) (hw wal.Offset, wait <-chan struct{}, err error) {
	hw, changed := p.HighWatermark()
	start, end := p.log.StartOffset(), max(p.log.EndOffset(), hw)
	switch {
	case from < start || from > end:
		return hw, nil, fmt.Errorf("%w: offset %d outside [%d, %d] of %s-%d", wal.ErrOffsetOutOfRange, from, start, end, p.topic, p.index)
	case from >= hw:
		return hw, changed, nil
	}
	return hw, nil, nil
}

// Read returns whole batches from offset, up to the high watermark, and the
// high watermark; nothing when there is nothing to read yet.
func (p *Partition) Read(from wal.Offset, maxBytes int) ([]byte, wal.Offset, error) {
	hw, wait, err := p.Position(from)
	if err != nil || wait != nil {
		return nil, hw, err
	}
	b, err := p.log.Read(from, hw, maxBytes)
	return b, hw, err
}
