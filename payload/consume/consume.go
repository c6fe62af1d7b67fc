package consume

// consume.go owns the Consumer (doc.go).
//
// Invariant: a partition's offset is marked (and so committed) only to
// rec.Offset+1 of a record rec that was opened, handled without error and
// read to a verified io.EOF, after every record before it in the
// partition was; a failed record is rewound to (SetOffsets) and its
// partition paused until its retry is due, so nothing after it is handled
// or marked before it succeeds.
// Invariant: when Run stops in the middle of a poll's records, the
// partition is rewound to the first record not handled, so a later Run
// neither skips nor marks past it.
// Invariant: the handler runs only between a poll and AllowRebalance
// (kgo.BlockRebalanceOnPoll), so no partition is revoked under it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/payload"
)

// Handler handles one record. body is the record's payload: its value, or
// for an envelope the object's bytes, verified as they are read (the
// reader returns payload.ErrChecksum instead of io.EOF when they are not
// the envelope's). A non-nil error leaves the record uncommitted, to be
// handled again after a backoff.
type Handler func(ctx context.Context, rec *kgo.Record, body io.Reader) error

// Config is what a Consumer consumes and how.
type Config struct {
	Group   string
	Topics  []string
	Payload *payload.Client // opens the payloads; required
	Handler Handler         // required
	// Backoff is the wait before the attempt-th retry of a failed record
	// (attempt ≥ 1); nil is DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// CommitInterval is how often marked offsets are committed (0: one
	// second; franz-go allows no less than 100 ms).
	CommitInterval time.Duration
	// OnError, when set, hears every failure of a record: its attempt
	// (1 for the first) and the error.
	OnError func(rec *kgo.Record, attempt int, err error)
	// Now is the clock of retry times (nil: time.Now).
	Now func() time.Time
}

// DefaultBackoff doubles from 100 ms to at most 10 s.
func DefaultBackoff(attempt int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < attempt && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

type tp struct {
	topic     string
	partition int32
}

// waiting is a partition held after a failure of its record at offset.
type waiting struct {
	offset int64
	due    time.Time
}

// failures counts the failed attempts of a partition's record at offset.
type failures struct {
	offset int64
	n      int
}

// Consumer runs the group: Run it (again after it returned for its
// context's end, if need be), then Close it.
type Consumer struct {
	cfg Config
	cl  *kgo.Client

	mu       sync.Mutex
	waiting  map[tp]waiting
	failures map[tp]failures
}

// New makes a Consumer of cfg with the client options opts (seed brokers,
// credentials, fetch sizes; not group, topic or commit options, which it
// sets).
func New(cfg Config, opts ...kgo.Opt) (*Consumer, error) {
	if cfg.Group == "" || len(cfg.Topics) == 0 || cfg.Payload == nil || cfg.Handler == nil {
		return nil, errors.New("consume: a group, topics, a payload client and a handler are required")
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Consumer{cfg: cfg, waiting: map[tp]waiting{}, failures: map[tp]failures{}}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics...),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(cfg.CommitInterval),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.revoked), kgo.OnPartitionsLost(c.lost),
	)...)
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	c.cl = cl
	return c, nil
}

// Client is the underlying client (for its group's offsets, metrics).
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Close commits the marked offsets and closes the client.
func (c *Consumer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.cl.CommitMarkedOffsets(ctx) // best effort: unmarked records are read again
	c.cl.Close()
}

// revoked commits what is marked of the partitions going away and forgets
// their holds.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	_ = cl.CommitMarkedOffsets(ctx) // best effort: the next owner reads the rest again
	c.lost(ctx, cl, lost)
}

// lost forgets the holds of partitions no longer assigned, and unpauses
// them so that a later assignment fetches them.
func (c *Consumer) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	for t, ps := range lost {
		for _, p := range ps {
			delete(c.waiting, tp{t, p})
			delete(c.failures, tp{t, p})
		}
	}
	c.mu.Unlock()
	cl.ResumeFetchPartitions(lost)
}

// Run consumes until ctx ends (its error is returned) or the client is
// closed.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wait := c.resumeDue()
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			pctx, cancel = context.WithTimeout(ctx, wait)
		}
		fs := c.cl.PollFetches(pctx)
		cancel()
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == nil {
				c.partition(ctx, p)
			}
		})
		c.cl.AllowRebalance()
	}
}

// resumeDue resumes the held partitions whose retry is due and returns
// how long until the next one is (0: none held).
func (c *Consumer) resumeDue() time.Duration {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	resume := map[string][]int32{}
	var next time.Duration
	for k, w := range c.waiting {
		if d := w.due.Sub(now); d > 0 {
			if next == 0 || d < next {
				next = d
			}
			continue
		}
		resume[k.topic] = append(resume[k.topic], k.partition)
		delete(c.waiting, k)
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(resume)
	}
	return next
}

// partition handles p's records in order, stopping at the first failure.
func (c *Consumer) partition(ctx context.Context, p kgo.FetchTopicPartition) {
	k := tp{p.Topic, p.Partition}
	for _, rec := range p.Records {
		c.mu.Lock()
		_, held := c.waiting[k]
		c.mu.Unlock()
		if held {
			return // fetched before the hold; read again after it
		}
		if ctx.Err() != nil {
			c.rewind(k, rec) // stopping: a later Run starts at rec
			return
		}
		err := c.handle(ctx, rec)
		if err == nil {
			c.mu.Lock()
			delete(c.failures, k)
			c.mu.Unlock()
			c.cl.MarkCommitRecords(rec)
			continue
		}
		if ctx.Err() != nil {
			c.rewind(k, rec) // stopping: the record stays uncommitted
			return
		}
		c.hold(k, rec, err)
		return
	}
}

// rewind sets rec's partition's position back to rec: the client moved
// past the records it handed out, handled or not.
func (c *Consumer) rewind(k tp, rec *kgo.Record) {
	c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{k.topic: {k.partition: {Epoch: rec.LeaderEpoch, Offset: rec.Offset}}})
}

// hold rewinds rec's partition to rec and pauses it until its retry.
func (c *Consumer) hold(k tp, rec *kgo.Record, err error) {
	c.mu.Lock()
	f := c.failures[k]
	if f.offset != rec.Offset {
		f = failures{offset: rec.Offset}
	}
	f.n++
	c.failures[k] = f
	c.waiting[k] = waiting{offset: rec.Offset, due: c.cfg.Now().Add(c.cfg.Backoff(f.n))}
	c.mu.Unlock()
	c.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.partition}})
	c.rewind(k, rec)
	if c.cfg.OnError != nil {
		c.cfg.OnError(rec, f.n, err)
	}
}

// handle opens rec's payload, runs the handler and reads what it left of
// the payload, so that success means the bytes were verified.
func (c *Consumer) handle(ctx context.Context, rec *kgo.Record) error {
	body, err := c.cfg.Payload.Open(ctx, rec)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	if err := c.cfg.Handler(ctx, rec, body); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("consume: the rest of the payload the handler left: %w", err)
	}
	return nil
}
