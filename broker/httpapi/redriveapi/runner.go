package redriveapi

// This file owns the runner of redrive jobs: a broker claims each running
// job it finds without a runner (meta.ClaimRedrive, bound to its
// registration lease), runs one worker per DLQ partition, and lets go when
// the job ends, is cancelled, or its lease is lost (another broker then
// claims it and resumes).
//
// Invariant (no copy published twice, across restarts and failovers): a
// worker writes its cursor (the next DLQ offset to decide) only after the
// copies of every matching record below it were acknowledged by the target,
// and with it, per target partition, a mark at or below any copy it may
// publish afterwards (1 + the offset of its last acknowledged copy there).
// A worker that starts (first run, restart, failover) first reads every
// target partition from its mark to the leader's log end as it stood when
// the scan reached it, waiting for the high watermark to pass that end (a
// copy its dead runner appended but no quorum had yet becomes readable a
// moment later; dedupe.go, settled), and collects the
// DLQ offsets at or after its cursor that a sluice.redrive.source header of
// its job and partition names: those were published (acknowledged or not)
// after the last cursor write, and are skipped, not published again.
// Progress is written only under the claim, so a runner that lost its
// claim stops at its next write.
// A runner publishes only while its registration lease surely holds
// (Registration.HeldUntil, before the lease can expire in etcd, so before
// another broker can claim the job), and its broker stops it before
// revoking the lease at shutdown; a publish in flight is never cut short.
// The window left: a publish that started before HeldUntil and has not
// yet reached the target's leader when the lease expires and the new
// runner scans (it needs a stall longer than the lease's TTL/2 in
// mid-publish), or one that reached only a leader deposed before a quorum
// had it, whose log a later election brings back; such a copy can
// be duplicated, with its message_id kept, so an idempotent consumer
// absorbs it.
//
// Invariant (no copy published twice by a repeated redrive, dedupe.go): a
// DLQ record that an ended job (done, cancelled, failed) on the same DLQ
// and target decided and published — its offset in [that job's start,
// its recorded cursor) of the partition and that job's frozen scope
// matches it, or a copy naming that job past its cursor is on the target
// — is counted deduped by a later job, not published. This holds because
// the later job reads the earlier jobs' progress only once it is final:
// the API refuses a job while another on the same DLQ and target runs
// (409), and a runner does not start while a job on its DLQ and target
// created before it still runs, or ended but still holds its claim (its
// workers may still write progress). Done jobs' cursors are at their
// ends; for the others the target is read from their marks (TargetStarts
// where a partition has none) for copies past their cursors, as a resumed
// runner reads its own. The window left is the one above: an earlier
// runner cut off from etcd whose publish, started before its lease
// expired, is acknowledged only after the later job read the target.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
)

// Tunables.
const (
	readBytes        = 1 << 20
	progressEvery    = 100                    // records decided between progress writes
	progressInterval = 500 * time.Millisecond // or this long
	pollInterval     = time.Second            // looking for jobs without a runner, and for cancels
	retryInterval    = time.Second            // after a failed step
	etcdTimeout      = 5 * time.Second
	settlePoll       = 50 * time.Millisecond // waiting for a target's high watermark to reach its log end
	settleTimeout    = 4 * time.Second       // and how long before the scan is retried
)

// Record is one record as the runner reads and writes it.
type Record struct {
	Offset      int64
	TimestampMs int64
	Key         []byte // nil: no key
	Value       []byte
	Headers     []queue.Header // without the message_id header
	MessageID   string
}

// Backend is what the runner needs of the broker (httpapi/redrive.go).
// Topic names are internal.
type Backend interface {
	// Read returns records of a partition from offset from on, below the
	// high watermark, about maxBytes of them, without waiting.
	Read(ctx context.Context, topic string, partition int32, from int64, maxBytes int) ([]Record, error)
	// Produce appends one record to a partition, acknowledged like a
	// publish, and returns its offset.
	Produce(ctx context.Context, topic string, partition int32, rec Record) (int64, error)
	// Bounds is a partition's log start, high watermark and log end at
	// its leader, read at once.
	Bounds(ctx context.Context, topic string, partition int32) (Bounds, error)
	// Partitions is a topic's partition count, false when it does not
	// exist.
	Partitions(topic string) (int32, bool)
}

// Bounds is a partition's offsets at its leader.
type Bounds struct {
	Start int64 // the log start
	HW    int64 // the high watermark: below it, records are committed
	// End is the leader's log end: records in [HW, End) are appended but
	// not yet acknowledged by a quorum. A leader never drops them while
	// it leads, so they become readable once the high watermark passes
	// them (or, should the leader change first, are replaced). 0 from a
	// broker that does not report it.
	End int64
}

// Registration is the broker's registration, when it has one.
type Registration func() (*meta.Registration, bool)

// Manager runs the redrive jobs this broker claims, and serves the API.
type Manager struct {
	be    Backend
	store *meta.Store
	node  int32
	log   zerolog.Logger
	now   func() time.Time
	wake  chan struct{}

	mu      sync.Mutex
	running map[string]bool
}

// New returns a Manager of broker nodeID.
func New(be Backend, store *meta.Store, nodeID int32, log zerolog.Logger) *Manager {
	return &Manager{be: be, store: store, node: nodeID, log: log.With().Str("component", "redrive").Logger(),
		now: time.Now, wake: make(chan struct{}, 1), running: map[string]bool{}}
}

// Run claims and runs jobs until ctx ends.
func (m *Manager) Run(ctx context.Context, reg Registration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		m.claimJobs(ctx, reg, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.wake:
		}
	}
}

// poke makes Run look for jobs now.
func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) claimJobs(ctx context.Context, reg Registration, wg *sync.WaitGroup) {
	r, ok := reg()
	if !ok {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	jobs, err := m.store.ListRedrives(lctx)
	if err != nil && ctx.Err() == nil {
		m.log.Warn().Err(err).Msg("list redrive jobs")
	}
	for _, j := range jobs {
		if j.State != meta.RedriveRunning {
			continue
		}
		m.mu.Lock()
		busy := m.running[j.ID]
		m.mu.Unlock()
		if busy {
			continue
		}
		claim, err := m.store.ClaimRedrive(lctx, j.ID, m.node, r.Info().Lease)
		if err != nil {
			if !errors.Is(err, meta.ErrConflict) {
				m.log.Warn().Err(err).Str("redrive", j.ID).Msg("claim redrive job")
			}
			continue
		}
		m.mu.Lock()
		m.running[j.ID] = true
		m.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				m.mu.Lock()
				delete(m.running, j.ID)
				m.mu.Unlock()
			}()
			m.runJob(ctx, r, claim)
		}()
	}
}

// errClaimLost stops a job's workers: another broker runs it now.
var errClaimLost = errors.New("redrive claim lost")

// runJob runs a claimed job until it is done, cancelled, or the claim is
// lost, then lets the claim go.
func (m *Manager) runJob(ctx context.Context, reg *meta.Registration, claim meta.RedriveClaim) {
	log := m.log.With().Str("redrive", claim.ID).Logger()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), etcdTimeout)
		defer cancel()
		if err := m.store.ReleaseRedrive(rctx, claim); err != nil {
			log.Warn().Err(err).Msg("release redrive claim")
		}
	}()
	for {
		rctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		job, prog, err := m.store.GetRedrive(rctx, claim.ID)
		cancel()
		if err != nil {
			log.Warn().Err(err).Msg("read redrive job")
			if errors.Is(err, meta.ErrNotFound) || !sleep(ctx, retryInterval) {
				return
			}
			continue
		}
		if job.State != meta.RedriveRunning {
			return
		}
		rctx, cancel = context.WithTimeout(ctx, etcdTimeout)
		prior, err := m.earlierJobs(rctx, job)
		cancel()
		if err != nil {
			if errors.Is(err, errTargetGone) {
				m.finish(ctx, claim, meta.RedriveFailed, err.Error())
				log.Warn().Err(err).Msg("redrive failed")
				return
			}
			if errors.Is(err, errEarlierBusy) {
				log.Debug().Err(err).Msg("redrive waits")
			} else {
				log.Warn().Err(err).Msg("load the earlier redrives of the same DLQ and target")
			}
			if !sleep(ctx, retryInterval) {
				return
			}
			continue
		}
		log.Info().Str("dlq", job.DLQ).Str("target", job.Target).Int("earlier", len(prior)).Msg("redrive running")
		err = m.runWorkers(ctx, reg, claim, job, prog, prior)
		switch {
		case err == nil:
			m.finish(ctx, claim, meta.RedriveDone, "")
			log.Info().Msg("redrive done")
			return
		case errors.Is(err, errTargetGone), errors.Is(err, ErrRefused):
			m.finish(ctx, claim, meta.RedriveFailed, err.Error())
			log.Warn().Err(err).Msg("redrive failed")
			return
		case !m.exists(job.DLQ):
			m.finish(ctx, claim, meta.RedriveFailed, "the DLQ no longer exists")
			log.Warn().Err(err).Msg("redrive failed")
			return
		case errors.Is(err, errClaimLost), errors.Is(err, errStopped), ctx.Err() != nil:
			log.Info().Err(err).Msg("redrive stopped on this broker")
			return
		}
		log.Warn().Err(err).Msg("redrive step failed; resuming from the recorded progress")
		if !sleep(ctx, retryInterval) {
			return
		}
	}
}

// exists reports whether a topic exists.
func (m *Manager) exists(topic string) bool {
	_, ok := m.be.Partitions(topic)
	return ok
}

// errStopped: the job is no longer running (cancelled), or the broker's
// registration was lost.
var errStopped = errors.New("redrive stopped")

// errTargetGone: the target topic no longer exists.
var errTargetGone = errors.New("redrive target does not exist")

// ErrRefused marks a copy the target refuses for good (Backend.Produce):
// an object reference that can no longer be claimed, a record too large
// for it. The job fails with the reason; its cursor stays at the record,
// which stays in the DLQ.
var ErrRefused = errors.New("redrive copy refused")

// runWorkers runs one worker per DLQ partition of job and a watcher that
// stops them when the job is cancelled or the registration lost.
func (m *Manager) runWorkers(ctx context.Context, reg *meta.Registration, claim meta.RedriveClaim, job meta.Redrive, prog map[int32]meta.RedriveProgress, prior []earlier) error {
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-reg.Lost():
				stop(errStopped)
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(wctx, etcdTimeout)
			j, _, err := m.store.GetRedrive(rctx, claim.ID)
			cancel()
			if err == nil && j.State != meta.RedriveRunning {
				stop(errStopped)
				return
			}
		}
	}()
	errs := make(chan error, len(job.Ends))
	for p := range job.Ends {
		pr, ok := prog[p]
		if !ok {
			pr = meta.RedriveProgress{Partition: p, Cursor: job.Starts[p]}
		}
		go func() { errs <- m.runPartition(wctx, reg, claim, job, pr, prior) }()
	}
	var first error
	for range job.Ends {
		if err := <-errs; err != nil && first == nil {
			first = err
			stop(err)
		}
	}
	if cause := context.Cause(wctx); first != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return first
}

// finish moves the job from running to state, under the claim.
func (m *Manager) finish(ctx context.Context, claim meta.RedriveClaim, state meta.RedriveState, reason string) {
	for range 5 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), etcdTimeout)
		job, _, err := m.store.GetRedrive(rctx, claim.ID)
		if err == nil && job.State == meta.RedriveRunning {
			job.State, job.Reason, job.FinishedMs = state, reason, m.now().UnixMilli()
			_, err = m.store.UpdateRedrive(rctx, job, &claim)
		}
		cancel()
		if err == nil || !errors.Is(err, meta.ErrConflict) {
			if err != nil {
				m.log.Warn().Err(err).Str("redrive", claim.ID).Msg("finish redrive")
			}
			return
		}
	}
}

// worker is one DLQ partition's run.
type worker struct {
	m     *Manager
	reg   *meta.Registration // its lease fences the claim
	claim meta.RedriveClaim
	job   meta.Redrive
	scope queue.RedriveScope
	prog  meta.RedriveProgress
	seen  map[int64]bool // DLQ offsets ≥ cursor already published (found on the target)
	prior []earlier      // the ended jobs on the same DLQ and target (dedupe.go)
	dirty int            // records decided since the last progress write
	wrote time.Time
	next  time.Time // pacing: when the next copy may be published
}

// runPartition redrives one DLQ partition from its recorded progress to
// its frozen end.
func (m *Manager) runPartition(ctx context.Context, reg *meta.Registration, claim meta.RedriveClaim, job meta.Redrive, prog meta.RedriveProgress, prior []earlier) error {
	w := &worker{m: m, reg: reg, claim: claim, job: job, prog: prog, prior: prior, scope: scopeOf(job.Scope), wrote: m.now()}
	if w.prog.Marks == nil {
		w.prog.Marks = map[int32]int64{}
	}
	p, end := prog.Partition, job.Ends[prog.Partition]
	if w.prog.Cursor >= end {
		return nil
	}
	if err := w.scanTarget(ctx); err != nil {
		return err
	}
	for w.prog.Cursor < end {
		recs, err := m.be.Read(ctx, job.DLQ, p, w.prog.Cursor, readBytes)
		if err != nil {
			return w.stopWith(ctx, fmt.Errorf("read %s-%d at %d: %w", job.DLQ, p, w.prog.Cursor, err))
		}
		progressed := false
		for _, rec := range recs {
			if rec.Offset < w.prog.Cursor || rec.Offset >= end {
				continue
			}
			if err := w.decide(ctx, rec); err != nil {
				return w.stopWith(ctx, err)
			}
			progressed = true
			if w.dirty >= progressEvery || m.now().Sub(w.wrote) >= progressInterval {
				if err := w.save(ctx); err != nil {
					return err
				}
			}
		}
		if !progressed {
			// Nothing readable at the cursor: the log start passed it
			// (retention), or what is left below end is not readable.
			b, err := m.be.Bounds(ctx, job.DLQ, p)
			if err != nil {
				return w.stopWith(ctx, err)
			}
			if b.Start > w.prog.Cursor {
				w.prog.Cursor = min(b.Start, end)
			} else {
				m.log.Warn().Str("redrive", job.ID).Int32("partition", p).Int64("from", w.prog.Cursor).Int64("end", end).
					Msg("nothing readable left below the frozen end; the partition is finished")
				w.prog.Cursor = end
			}
			w.dirty++
		}
	}
	return w.save(ctx)
}

// scanTarget finds the copies of this partition's DLQ records at or after
// the cursor already on the target (the file's invariant).
func (w *worker) scanTarget(ctx context.Context) error {
	w.seen = map[int64]bool{}
	from := func(tp int32) int64 {
		if mark, ok := w.prog.Marks[tp]; ok {
			return mark
		}
		return w.job.TargetStarts[tp]
	}
	err := w.m.scanCopies(ctx, w.job.Target, from, func(id string, p int32, o int64) {
		if id == w.job.ID && p == w.prog.Partition && o >= w.prog.Cursor {
			w.seen[o] = true
		}
	})
	if err != nil {
		return err
	}
	if len(w.seen) > 0 {
		w.m.log.Info().Str("redrive", w.job.ID).Int32("partition", w.prog.Partition).Int("found", len(w.seen)).
			Msg("copies published after the last recorded progress found on the target; not publishing them again")
	}
	return nil
}

// decide redrives, dedupes or skips one DLQ record and moves the cursor
// past it.
func (w *worker) decide(ctx context.Context, rec Record) error {
	p := w.prog.Partition
	switch {
	case !w.scope.Match(rec.Offset, rec.TimestampMs, rec.Key, rec.Headers):
		w.prog.Skipped++
	case w.seen[rec.Offset]:
		w.prog.Deduped++
		delete(w.seen, rec.Offset)
	case w.covered(rec):
		w.prog.Deduped++
	default:
		n, ok := w.m.be.Partitions(w.job.Target)
		if !ok {
			return fmt.Errorf("%w: %s", errTargetGone, w.job.Target)
		}
		if err := w.pace(ctx); err != nil {
			return err
		}
		tp := queue.RedrivePartition(rec.Headers, p, n)
		cp := Record{TimestampMs: rec.TimestampMs, Key: rec.Key, Value: rec.Value, MessageID: rec.MessageID,
			Headers: queue.RedriveHeaders(rec.Headers, w.job.ID, p, rec.Offset)}
		// The claim is this broker's while its lease surely holds; past
		// that, another broker may have taken the job.
		if err := w.leaseHeld(ctx); err != nil {
			return err
		}
		// Not cut short by a stop: a copy is acknowledged or refused
		// before the claim can end (the file's invariant).
		off, err := w.m.be.Produce(context.WithoutCancel(ctx), w.job.Target, tp, cp)
		if err != nil {
			if errors.Is(err, node.ErrUnknownTopic) {
				err = fmt.Errorf("%w: %w", errTargetGone, err)
			}
			return fmt.Errorf("redrive %s-%d@%d to %s-%d: %w", w.job.DLQ, p, rec.Offset, w.job.Target, tp, err)
		}
		w.prog.Marks[tp] = max(w.prog.Marks[tp], off+1)
		w.prog.Redriven++
	}
	w.prog.Cursor = rec.Offset + 1
	w.dirty++
	return nil
}

// leaseHeld waits until the registration's lease surely holds (a renewal
// late under load), or refuses when the registration is lost.
func (w *worker) leaseHeld(ctx context.Context) error {
	for !w.m.now().Before(w.reg.HeldUntil()) {
		select {
		case <-w.reg.Lost():
			return fmt.Errorf("%w: the registration lease was lost", errStopped)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// pace waits until the next copy may go at the job's rate.
func (w *worker) pace(ctx context.Context) error {
	if w.job.Rate <= 0 {
		return nil
	}
	now := w.m.now()
	if w.next.After(now) {
		if !sleep(ctx, w.next.Sub(now)) {
			return context.Cause(ctx)
		}
		now = w.next
	}
	w.next = now.Add(time.Second / time.Duration(w.job.Rate))
	return nil
}

// save writes the progress under the claim.
func (w *worker) save(ctx context.Context) error {
	w.prog.UpdatedMs = w.m.now().UnixMilli()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), etcdTimeout)
	defer cancel()
	err := w.m.store.PutRedriveProgress(sctx, w.claim, w.prog)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: %w", errClaimLost, err)
	}
	if err != nil {
		return err
	}
	w.dirty, w.wrote = 0, w.m.now()
	return nil
}

// stopWith records the progress made before err stopped the worker (the
// copies below the cursor were all acknowledged) and returns err.
func (w *worker) stopWith(ctx context.Context, err error) error {
	if w.dirty > 0 {
		if serr := w.save(ctx); serr != nil {
			w.m.log.Warn().Err(serr).Str("redrive", w.job.ID).Msg("record redrive progress")
		}
	}
	return err
}

// scopeOf is a stored scope as the pure core's.
func scopeOf(s meta.RedriveScope) queue.RedriveScope {
	return queue.RedriveScope{FromOffset: s.FromOffset, ToOffset: s.ToOffset, FromMs: s.FromMs, ToMs: s.ToMs,
		HasKey: s.HasKey, Key: s.Key, Class: s.Class}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
