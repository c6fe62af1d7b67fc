package canary

// This file owns the runner: the publisher, the consumer and the
// reconciler's rounds, each a goroutine over franz-go clients of the
// broker's own Kafka listener. Invariants: a batch's results are durable
// in the Sink before its offsets are committed; a Sink failure ends the
// consumer's session, so the next one resumes from the committed offsets
// and no record is passed over; the availability gauge is 0 until the
// first round is acknowledged in full, and goes to 0 the moment a round
// fails, so an outage shorter than a reconcile round still counts; the
// previous run's mark is taken over before the first round, and a clean
// stop leaves one before the store closes (availability.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultTopic is the canary topic every AZ's canary shares.
const DefaultTopic = "__sluice_canary"

// Config configures one canary.
type Config struct {
	Brokers    []string // the broker's own Kafka listener
	AZ         string   // the AZ probed; names the group
	NodeID     int32
	Dir        string // the business store's directory
	Topic      string // DefaultTopic when empty
	Partitions int32  // of a topic the canary creates (3 when 0); every partition is probed each round
	// MinBrokers: the canary creates its topic only once this many brokers
	// are live, so a cluster's first start does not give it the replication
	// factor of the brokers that happened to be up first (1 when 0).
	MinBrokers int
	// Interval is the time between rounds (1s when 0); Timeout bounds a
	// publish (5s); Deadline is the longest an acknowledged record may wait
	// for its result while the canary counts as available (10s);
	// LostAfter makes such a record a "lost" mismatch (2m); Retention
	// bounds the topic's records and the store's results (1h).
	Interval, Timeout, Deadline, LostAfter, Retention time.Duration
	// SaveEvery is the least time between two marks an available canary
	// saves for the run after a crash of its broker (5s when 0): that
	// run reports an outage whose length is overstated by less than it
	// (availability.go).
	SaveEvery  time.Duration
	Now        func() time.Time // time.Now when nil
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
}

func (c *Config) defaults() {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.AZ == "" {
		c.AZ = "default"
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Interval, time.Second)
	set(&c.Timeout, 5*time.Second)
	set(&c.Deadline, 10*time.Second)
	set(&c.LostAfter, 2*time.Minute)
	set(&c.Retention, time.Hour)
	set(&c.SaveEvery, 5*time.Second)
	if c.Partitions <= 0 {
		c.Partitions = 3
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Group is the consumer group of az's canary.
func Group(topic, az string) string { return topic + "." + az }

// value is a canary record's value (doc.go).
type value struct {
	ID     string `json:"id"`
	SentNs int64  `json:"sent_ns"`
}

// parseValue decodes a canary record's value (bytes from the wire).
func parseValue(b []byte) (value, error) {
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return value{}, fmt.Errorf("canary: record value: %w", err)
	}
	if v.ID == "" {
		return value{}, errors.New("canary: record value: no id")
	}
	return v, nil
}

// Canary is one AZ's running canary.
type Canary struct {
	cfg  Config
	m    *metrics
	rec  *Reconciler
	sink *Sink
	log  zerolog.Logger

	partitions int32
	avail      availability
	seq        int64
	runID      int64
}

// New registers the canary's metrics; Run starts it.
func New(cfg Config) *Canary {
	cfg.defaults()
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := newMetrics(reg, cfg.AZ)
	log := cfg.Logger.With().Str("component", "canary").Str("az", cfg.AZ).Logger()
	return &Canary{cfg: cfg, m: m, rec: NewReconciler(cfg.Now, cfg.LostAfter), avail: availability{m: m, log: log, now: cfg.Now, every: cfg.SaveEvery},
		log: log, runID: cfg.Now().UnixNano()}
}

// Run probes until ctx is cancelled.
func (c *Canary) Run(ctx context.Context) error {
	if err := c.openStore(); err != nil {
		return err
	}
	defer func() { c.closeStore(ctx.Err() != nil) }()
	common := []kgo.Opt{kgo.SeedBrokers(c.cfg.Brokers...), kgo.ClientID("sluice-canary-" + c.cfg.AZ)}
	admCl, err := kgo.NewClient(common...)
	if err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for {
		if err = c.ensureTopic(ctx, adm); err == nil {
			break
		}
		switch {
		case errors.Is(err, errCreated):
			c.log.Info().Str("topic", c.cfg.Topic).Msg("canary topic created")
		case errors.Is(err, errNotReady):
		default:
			c.log.Warn().Err(err).Msg("canary topic not ready")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.cfg.Interval):
		}
	}
	prod, err := kgo.NewClient(append(common, kgo.DefaultProduceTopic(c.cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(c.cfg.Timeout), kgo.ProducerLinger(0))...)
	if err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	defer prod.Close()
	c.log.Info().Str("topic", c.cfg.Topic).Int32("partitions", c.partitions).Msg("canary running")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.consumeLoop(ctx, common) }()
	go func() {
		defer wg.Done()
		c.reconcileLoop(ctx, newOffsetReader(admCl, Group(c.cfg.Topic, c.cfg.AZ), c.cfg.Topic))
	}()
	c.publishLoop(ctx, prod)
	wg.Wait()
	return nil
}

// openStore opens the business store and takes over the previous run's
// mark, so an outage its broker's crash caused is reported now, before
// this run's first round (availability.go).
func (c *Canary) openStore() error {
	sink, err := OpenSink(c.cfg.Dir)
	if err != nil {
		return err
	}
	c.sink = sink
	prev, err := sink.loadMark()
	if err != nil {
		c.log.Warn().Err(err).Msg("canary: the previous run's mark is not taken over")
	}
	c.avail.save = sink.saveMark
	c.avail.resume(prev)
	return nil
}

// closeStore closes the business store; on a clean stop (the run's
// context cancelled) the canary's mark says so first.
func (c *Canary) closeStore(clean bool) {
	if clean {
		c.avail.stop()
	}
	_ = c.sink.Close()
}

// ensureTopic creates the canary topic if missing and learns its
// partitions.
func (c *Canary) ensureTopic(ctx context.Context, adm *kadm.Client) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	topics, err := adm.ListTopics(ctx, c.cfg.Topic)
	if err != nil {
		return err
	}
	if d, ok := topics[c.cfg.Topic]; ok {
		if d.Err == nil && len(d.Partitions) > 0 {
			c.partitions = int32(len(d.Partitions))
			return nil
		}
		if !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return errNotReady // it exists: its partitions are being placed
		}
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return err
	}
	if len(brokers) < c.cfg.MinBrokers {
		c.log.Debug().Int("live", len(brokers)).Int("want", c.cfg.MinBrokers).Msg("canary topic: waiting for the cluster's brokers")
		return errNotReady
	}
	rf := int16(min(3, len(brokers)))
	retention := fmt.Sprint(c.cfg.Retention.Milliseconds())
	_, err = adm.CreateTopic(ctx, c.cfg.Partitions, rf, map[string]*string{"retention.ms": &retention}, c.cfg.Topic)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return errNotReady
	case err != nil:
		return err
	}
	return errCreated
}

// ensureTopic's answers while the topic has no partitions to learn yet:
// it created the topic, or found it being created.
var (
	errCreated  = errors.New("canary topic created")
	errNotReady = errors.New("canary topic has no partitions yet")
)

// publishLoop sends one record to every partition each round. A round
// waits for its acknowledgements at most Timeout: an idempotent producer
// holds a record it cannot yet fail safely (its sequence number may be in
// flight) past its delivery timeout, so a record still unanswered then
// counts as a failed publish (once), and its late answer only records
// where it landed.
func (c *Canary) publishLoop(ctx context.Context, prod *kgo.Client) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var (
			wg sync.WaitGroup
			ok atomic.Bool
		)
		ok.Store(true)
		failed := make([]atomic.Bool, c.partitions)   // counted as a failed publish
		answered := make([]atomic.Bool, c.partitions) // the producer's promise ran
		fail := func(p int32) {
			ok.Store(false)
			if failed[p].CompareAndSwap(false, true) {
				c.m.failures.WithLabelValues(StagePublish).Inc()
			}
		}
		for p := range c.partitions {
			c.seq++
			id := fmt.Sprintf("%s-%d-%d-%d", c.cfg.AZ, c.cfg.NodeID, c.runID, c.seq)
			v, _ := json.Marshal(value{ID: id, SentNs: c.cfg.Now().UnixNano()})
			c.rec.Sent(id)
			c.m.attempts.Inc()
			wg.Add(1)
			pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			prod.Produce(pctx, &kgo.Record{Partition: p, Key: []byte(c.cfg.AZ), Value: v}, func(r *kgo.Record, err error) {
				defer wg.Done()
				defer cancel()
				answered[p].Store(true)
				if err != nil {
					c.rec.Failed(id)
					fail(p)
					c.log.Debug().Err(err).Str("id", id).Int32("partition", p).Msg("canary publish failed")
					return
				}
				c.rec.Acked(id, r.Partition, r.Offset)
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		timer := time.NewTimer(c.cfg.Timeout + c.cfg.Timeout/10)
		select {
		case <-done:
		case <-timer.C:
			for p := range c.partitions {
				if !answered[p].Load() {
					fail(p)
				}
			}
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
		c.avail.round(ok.Load())
	}
}

// consumeLoop runs consumer sessions until ctx is cancelled; a session
// ends on a Sink failure, and the next resumes from the committed offsets.
func (c *Canary) consumeLoop(ctx context.Context, common []kgo.Opt) {
	for ctx.Err() == nil {
		if err := c.consumeSession(ctx, common); err != nil {
			c.log.Warn().Err(err).Msg("canary consumer session ended")
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.cfg.Interval):
		}
	}
}

func (c *Canary) consumeSession(ctx context.Context, common []kgo.Opt) error {
	// Offsets are committed at most once per Interval (commits.go): a
	// round's records arrive in one to Partitions fetches, and each commit
	// is a write of the group's offsets to etcd.
	pend := &pendingCommits{every: c.cfg.Interval, last: c.cfg.Now()}
	// A rebalance takes partitions only after their results' offsets are
	// committed; a lost session's uncommitted offsets are dropped (their
	// records come again, and count as duplicates).
	onRevoked := func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
		c.flush(ctx, cl, pend)
	}
	onLost := func(context.Context, *kgo.Client, map[string][]int32) { pend.drop() }
	// The fetch wait is 100 ms or more: with 5 ms rounds and a 5 ms wait no
	// records came at all (TestCanaryStopsWithBrokerAndResumes).
	cons, err := kgo.NewClient(append(common, kgo.ConsumerGroup(Group(c.cfg.Topic, c.cfg.AZ)), kgo.ConsumeTopics(c.cfg.Topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsRevoked(onRevoked), kgo.OnPartitionsLost(onLost),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(max(c.cfg.Interval, 100*time.Millisecond)))...)
	if err != nil {
		return err
	}
	defer func() {
		// The session's last offsets, so the next session does not read
		// their records again; bounded, as the broker may be stopping.
		fctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.Timeout, time.Second))
		c.flush(fctx, cons, pend)
		cancel()
		cons.AllowRebalance() // a blocked rebalance would hold Close's LeaveGroup
		cons.Close()
	}()
	for {
		// With offsets held, the poll waits no longer than their commit is due.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if due, ok := pend.due(); ok {
			pctx, cancel = context.WithDeadline(ctx, due)
		}
		fs := cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(_ string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return // the poll's own deadline: a commit is due
			}
			c.m.failures.WithLabelValues(StageConsume).Inc()
			c.log.Debug().Err(err).Int32("partition", p).Msg("canary fetch failed")
		})
		offsets, puts := c.batch(fs)
		if len(puts) > 0 {
			dups, err := c.sink.PutBatch(puts, c.cfg.Now())
			if err != nil {
				c.m.failures.WithLabelValues(StageSink).Inc()
				pend.drop() // only offsets past stored results are ever committed
				cons.AllowRebalance()
				return err
			}
			for i, dup := range dups {
				if dup {
					c.m.duplicates.Inc()
				} else if lat, ok := c.rec.Applied(puts[i].ID); ok {
					c.m.latency.Observe(lat.Seconds())
				}
			}
		}
		// The results are stored (PutBatch returned): their offsets may be
		// committed.
		pend.add(offsets)
		if pend.isDue(c.cfg.Now()) {
			c.flush(ctx, cons, pend)
		}
		cons.AllowRebalance()
	}
}

// flush commits the held offsets; on failure they stay held for the next
// try (a later commit of the same partition supersedes them).
func (c *Canary) flush(ctx context.Context, cons *kgo.Client, pend *pendingCommits) {
	offsets := pend.take(c.cfg.Now())
	if len(offsets) == 0 {
		return
	}
	if err := c.commit(ctx, cons, offsets); err != nil {
		pend.restore(offsets)
		c.m.failures.WithLabelValues(StageCommit).Inc()
		c.log.Debug().Err(err).Msg("canary commit failed")
	}
}

// batch is the offsets past a poll's records and the results of this AZ's.
func (c *Canary) batch(fs kgo.Fetches) (map[int32]kgo.EpochOffset, []Put) {
	offsets := map[int32]kgo.EpochOffset{}
	var puts []Put
	fs.EachRecord(func(r *kgo.Record) {
		offsets[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		if string(r.Key) != c.cfg.AZ {
			return
		}
		v, err := parseValue(r.Value)
		if err != nil {
			c.log.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("canary record skipped")
			return
		}
		puts = append(puts, Put{ID: v.ID, Result: Result{Partition: r.Partition, Offset: r.Offset}})
	})
	return offsets, puts
}

func (c *Canary) commit(ctx context.Context, cons *kgo.Client, offsets map[int32]kgo.EpochOffset) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var cerr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = err
					}
				}
			}
		})
	return cerr
}

// reconcileLoop reads the group's committed offsets back, checks every
// tracked id and sets the availability gauge each round.
func (c *Canary) reconcileLoop(ctx context.Context, offsets *offsetReader) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	lastPrune := c.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		offs, err := offsets.committed(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.m.failures.WithLabelValues(StageReconcile).Inc()
			c.log.Debug().Err(err).Msg("canary: committed offsets unread")
		} else {
			for p, at := range offs {
				c.rec.Committed(p, at)
			}
		}
		for _, mm := range c.rec.Check(c.sink.Get) {
			c.m.mismatches.WithLabelValues(mm.Kind).Inc()
			c.log.Error().Str("kind", mm.Kind).Str("id", mm.ID).Int32("partition", mm.Partition).Int64("offset", mm.Offset).
				Str("detail", mm.Detail).Msg("canary mismatch")
		}
		oldest := c.rec.OldestUnapplied()
		c.m.unapplied.Set(oldest.Seconds())
		c.avail.late(oldest > c.cfg.Deadline)
		if now := c.cfg.Now(); now.Sub(lastPrune) > time.Minute {
			lastPrune = now
			if _, err := c.sink.Prune(now.Add(-c.cfg.Retention)); err != nil {
				c.log.Warn().Err(err).Msg("canary: prune results")
			}
		}
	}
}
