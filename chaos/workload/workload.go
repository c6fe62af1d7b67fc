package workload

// This file owns a workload's lifetime: Run (the topic, then every client),
// Stop, Stats, process ids and recording, and the pieces the clients share
// (client options, the kgo logger, offset listing).
//
// Invariant: every goroutine the workload starts is cancelled and waited for
// by Stop; after Stop returns no client of the run is open and no event of
// it is still to be recorded.
// Invariant: process ids are never reused within a workload.
// mu guards members and stopped; the counters are atomics; everything else
// is immutable after Run.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/history"
)

// fetchMaxWait bounds how long a fetch waits for data, so consumers notice a
// cancelled context or a reached end quickly.
const fetchMaxWait = 500 * time.Millisecond

// retryEvery is the pause between attempts of an admin call that failed
// while the cluster recovers.
const retryEvery = 200 * time.Millisecond

// Workload is a running workload. Its methods are safe for concurrent use.
type Workload struct {
	cfg     Config
	rec     *history.Recorder
	log     zerolog.Logger
	started time.Time

	adminCl *kgo.Client    // run-time admin (topic, readers' resets); closed by Stop
	admin   *kadm.Client   // over adminCl
	bg      sync.WaitGroup // closes of crashed members' clients

	nextProcess atomic.Int64
	n           counters
	recErr      error // first failed Record; guarded by recMu
	recMu       sync.Mutex

	producers []interface{ stop(time.Duration) } // kgo and librdkafka producers; immutable after Run
	readers   []*reader                          // immutable after Run

	mu       sync.Mutex
	members  []*member // guarded by mu; RestartMember replaces entries
	stopped  bool      // guarded by mu
	stopOnce sync.Once
	elapsed  atomic.Int64 // run time in ns, set by Stop
}

// counters back Stats.
type counters struct {
	sendsOK, sendsFail, sendsInfo atomic.Int64
	rdkOK, rdkNotOK               atomic.Int64 // of them, the librdkafka producers'
	polls, records                atomic.Int64
	commits, commitsOK            atomic.Int64
	assigns, revokes, seeks       atomic.Int64
	recordErrors                  atomic.Int64
}

// Stats is a snapshot of what the workload has recorded so far.
type Stats struct {
	SendsOK, SendsFailed, SendsUnknown int64
	// LibrdkafkaOK and LibrdkafkaNotOK: the librdkafka producers' sends
	// among them, acknowledged and not (failed or unknown).
	LibrdkafkaOK, LibrdkafkaNotOK int64
	Polls, RecordsRead            int64 // poll events recorded and the records in them
	Commits, CommitsOK            int64 // commit events and those with outcome ok
	Assigns, Revokes, Seeks       int64
	RecordErrors                  int64 // events the Recorder refused
	Elapsed                       time.Duration
	AckedPerSecond                float64
}

// Run creates the topic when missing, waits until every partition has a
// leader, and starts every client in the background. ctx bounds this setup
// only; the clients run until Stop, which must be called.
func Run(ctx context.Context, cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w := &Workload{
		cfg: cfg,
		rec: cfg.Recorder,
		log: cfg.Logger.With().Str("component", "chaos-workload").Str("topic", cfg.Topic).Logger(),
	}
	w.nextProcess.Store(int64(cfg.FirstProcess))
	adminCl, err := kgo.NewClient(w.clientOpts("admin")...)
	if err != nil {
		return nil, fmt.Errorf("workload: admin client: %w", err)
	}
	w.adminCl, w.admin = adminCl, kadm.NewClient(adminCl)
	if err := w.ensureTopic(ctx); err != nil {
		adminCl.Close()
		return nil, err
	}
	w.started = time.Now()
	if err := w.startClients(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func (w *Workload) startClients(ctx context.Context) error {
	perProducer := float64(w.cfg.Rate) / float64(max(w.cfg.Producers+w.cfg.LibrdkafkaProducers, 1))
	for i := range w.cfg.Producers {
		p, err := w.startProducer(i, time.Duration(float64(time.Second)/perProducer))
		if err != nil {
			return err
		}
		w.producers = append(w.producers, p)
	}
	for range w.cfg.LibrdkafkaProducers {
		p, err := w.startRdProducer(ctx, time.Duration(float64(time.Second)/perProducer))
		if err != nil {
			return err
		}
		w.producers = append(w.producers, p)
	}
	for i := range w.cfg.Members {
		m, err := w.startMember(i)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.members = append(w.members, m)
		w.mu.Unlock()
	}
	if w.cfg.Readers {
		for p := range w.cfg.Partitions {
			r, err := w.startReader(ctx, p)
			if err != nil {
				return err
			}
			w.readers = append(w.readers, r)
		}
	}
	return nil
}

// Stop stops every client: producers stop issuing sends and flush what is
// buffered (up to Config.StopTimeout; the rest is closed and recorded as
// info), members and readers stop polling and close (members leave the
// group). Every send, poll and commit in flight is recorded before Stop
// returns. A second Stop does nothing.
func (w *Workload) Stop() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.stopped = true
		members := append([]*member(nil), w.members...)
		w.mu.Unlock()
		w.elapsed.Store(int64(time.Since(w.started)))

		var wg sync.WaitGroup
		for _, p := range w.producers {
			wg.Go(func() { p.stop(w.cfg.StopTimeout) })
		}
		for _, m := range members {
			wg.Go(m.stop)
		}
		for _, r := range w.readers {
			wg.Go(r.stop)
		}
		wg.Wait()
		w.bg.Wait()
		w.adminCl.Close()
		if err := w.rec.Flush(); err != nil {
			w.noteRecordError(err)
		}
	})
}

// Stats returns the counts so far. AckedPerSecond is over the run time
// until now, or until Stop.
func (w *Workload) Stats() Stats {
	s := Stats{
		SendsOK:      w.n.sendsOK.Load(),
		SendsFailed:  w.n.sendsFail.Load(),
		SendsUnknown: w.n.sendsInfo.Load(),
		LibrdkafkaOK: w.n.rdkOK.Load(), LibrdkafkaNotOK: w.n.rdkNotOK.Load(),
		Polls:        w.n.polls.Load(),
		RecordsRead:  w.n.records.Load(),
		Commits:      w.n.commits.Load(),
		CommitsOK:    w.n.commitsOK.Load(),
		Assigns:      w.n.assigns.Load(),
		Revokes:      w.n.revokes.Load(),
		Seeks:        w.n.seeks.Load(),
		RecordErrors: w.n.recordErrors.Load(),
		Elapsed:      time.Duration(w.elapsed.Load()),
	}
	if s.Elapsed == 0 {
		s.Elapsed = time.Since(w.started)
	}
	if s.Elapsed > 0 {
		s.AckedPerSecond = float64(s.SendsOK) / s.Elapsed.Seconds()
	}
	return s
}

// Err is the first error of the Recorder, or nil: a history with a hole
// must not be checked as complete.
func (w *Workload) Err() error {
	w.recMu.Lock()
	defer w.recMu.Unlock()
	return w.recErr
}

// newProcess allocates a process id.
func (w *Workload) newProcess() history.Process {
	return history.Process(w.nextProcess.Add(1) - 1)
}

// record appends an event and counts it. A refused event is logged and
// kept as Err: the run's history is then incomplete.
func (w *Workload) record(ev history.Event) {
	if err := w.rec.Record(ev); err != nil {
		w.noteRecordError(err)
		return
	}
	switch e := ev.(type) {
	case history.Send:
		switch e.Outcome {
		case history.OK:
			w.n.sendsOK.Add(1)
		case history.Fail:
			w.n.sendsFail.Add(1)
		default:
			w.n.sendsInfo.Add(1)
		}
	case history.Poll:
		w.n.polls.Add(1)
		w.n.records.Add(int64(len(e.Records)))
	case history.Commit:
		w.n.commits.Add(1)
		if e.Outcome == history.OK {
			w.n.commitsOK.Add(1)
		}
	case history.Assign:
		w.n.assigns.Add(1)
	case history.Revoke:
		w.n.revokes.Add(1)
	case history.Seek:
		w.n.seeks.Add(1)
	}
}

func (w *Workload) noteRecordError(err error) {
	w.n.recordErrors.Add(1)
	w.log.Error().Err(err).Msg("history: event not recorded")
	w.recMu.Lock()
	if w.recErr == nil {
		w.recErr = err
	}
	w.recMu.Unlock()
}

// clientOpts are the options every client of the workload shares.
func (w *Workload) clientOpts(name string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Bootstrap...),
		kgo.ClientID("chaos-" + name),
		kgo.WithLogger(kgoLogger{log: w.log.With().Str("client", name).Logger()}),
	}, extra...)
}

// ensureTopic creates the topic unless it exists and waits until every
// partition has a leader.
func (w *Workload) ensureTopic(ctx context.Context) error {
	configs := make(map[string]*string, len(w.cfg.TopicConfigs))
	for k, v := range w.cfg.TopicConfigs {
		configs[k] = &v
	}
	return retry(ctx, "create topic "+w.cfg.Topic, func() error {
		resp, err := w.admin.CreateTopic(ctx, w.cfg.Partitions, w.cfg.ReplicationFactor, configs, w.cfg.Topic)
		if err == nil && resp.Err != nil {
			err = resp.Err
			if resp.ErrMessage != "" { // the broker's own words: which AZs it counts, say
				err = fmt.Errorf("%w: %s", resp.Err, resp.ErrMessage)
			}
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		md, err := w.admin.Metadata(ctx, w.cfg.Topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[w.cfg.Topic]
		switch {
		case !ok:
			return errors.New("topic not in metadata yet")
		case td.Err != nil:
			return fmt.Errorf("topic metadata: %w", td.Err)
		}
		if n := int32(len(td.Partitions)); n != w.cfg.Partitions {
			return fmt.Errorf("topic has %d partitions, the workload wants %d", n, w.cfg.Partitions)
		}
		for _, pd := range td.Partitions {
			if pd.Err != nil {
				return fmt.Errorf("partition %d metadata: %w", pd.Partition, pd.Err)
			}
			if pd.Leader < 0 {
				return fmt.Errorf("partition %d has no leader yet", pd.Partition)
			}
		}
		return nil
	})
}

// listOffset lists partition p's log start (end false) or high watermark
// (end true), retrying until ctx ends.
func listOffset(ctx context.Context, adm *kadm.Client, topic string, p int32, end bool) (history.Offset, error) {
	var at history.Offset
	what := "log start"
	if end {
		what = "high watermark"
	}
	err := retry(ctx, fmt.Sprintf("list %s of partition %d", what, p), func() error {
		list := adm.ListStartOffsets
		if end {
			list = adm.ListEndOffsets
		}
		offs, err := list(ctx, topic)
		if err != nil {
			return err
		}
		lo, ok := offs.Lookup(topic, p)
		switch {
		case !ok:
			return fmt.Errorf("partition %d not listed", p)
		case lo.Err != nil:
			return lo.Err
		case lo.Offset < 0:
			return fmt.Errorf("partition %d listed at offset %d", p, lo.Offset)
		}
		at = history.Offset(lo.Offset)
		return nil
	})
	return at, err
}

// retry calls fn until it succeeds or ctx ends; the error then names what
// and wraps fn's last error.
func retry(ctx context.Context, what string, fn func() error) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		t.Reset(retryEvery)
		select {
		case <-ctx.Done():
			return fmt.Errorf("workload: %s: %w (%w)", what, err, ctx.Err())
		case <-t.C:
		}
	}
}

// kgoLogger passes kgo's warnings and errors to zerolog, unless mute is
// set (a crashed member's client complains of nothing but its crash). Of
// kgo's info messages it passes those about the producer id (as warnings):
// a producer that fails its id or bumps its epoch resends its unanswered
// batches as new records, which no broker can deduplicate, so a duplicate
// in a history is explained by these lines (or is the broker's).
type kgoLogger struct {
	log  zerolog.Logger
	mute *atomic.Bool // may be nil
}

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

// aboutProducerID reports whether a kgo message is about the idempotent
// producer's id or epoch ("locally bumping idempotent producer epoch",
// "failing the producer ID and resetting all sequence numbers", ...).
func aboutProducerID(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "producer id") || strings.Contains(msg, "producer epoch")
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if l.mute != nil && l.mute.Load() {
		return
	}
	if keep := level <= kgo.LogLevelWarn || level == kgo.LogLevelInfo && aboutProducerID(msg); !keep {
		return
	}
	ev := l.log.Warn()
	if level == kgo.LogLevelError {
		ev = l.log.Error()
	}
	ev.Fields(keyvals).Msg(msg)
}
