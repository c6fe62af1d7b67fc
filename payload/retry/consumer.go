package retry

// This file owns Consumer (doc.go): a group consumer of source topics and
// their retry tiers that holds a tier's records until they are due.
//
// Invariant: a tier record is handed out only when its due time has come
// (by Config.Now), and a tier partition's records in offset order: once
// one of them is held, every later record of that partition is held
// behind it, and the partition is paused until the hold is empty.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/queue"
)

// Config is what a Consumer consumes.
type Config struct {
	Group  string
	Topics []string // source topics
	// Contracts of the source topics; a topic missing here is read with
	// ContractOf at start.
	Contracts  map[string]queue.Contract
	NameBudget int              // 0 means DefaultNameBudget
	Now        func() time.Time // nil means time.Now
	Rand       func() float64   // nil means math/rand
}

type tp struct {
	topic     string
	partition int32
}

// Consumer consumes a group's source topics and their retry tiers.
type Consumer struct {
	cl, prod  *kgo.Client
	nacker    *Nacker
	now       func() time.Time
	contracts map[string]queue.Contract
	tiers     map[string]bool

	mu     sync.Mutex
	held   map[tp][]*kgo.Record // a tier partition's records from its first not yet due on
	handed []*kgo.Record        // handed out by the last Poll, marked by the next
	strict map[tp]*strictPart   // the strict source partitions owned (strict.go)

	commitMu sync.Mutex // serialises strict commits and reconciles (strict.go)
	lastSync time.Time  // guarded by commitMu
}

// NewConsumer starts a consumer of cfg with the client options opts (seed
// brokers, credentials; not group or consume options, which it sets). It
// creates the missing retry tiers of every source topic.
func NewConsumer(ctx context.Context, cfg Config, opts ...kgo.Opt) (*Consumer, error) {
	if cfg.Group == "" || len(cfg.Topics) == 0 {
		return nil, errors.New("retry: a group and at least one topic are required")
	}
	prod, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.RecordPartitioner(Partitioner(kgo.StickyKeyPartitioner(nil))))...)
	if err != nil {
		return nil, err
	}
	c := &Consumer{prod: prod, now: cfg.Now, contracts: map[string]queue.Contract{}, tiers: map[string]bool{}, held: map[tp][]*kgo.Record{},
		strict: map[tp]*strictPart{}}
	if c.now == nil {
		c.now = time.Now
	}
	c.nacker = &Nacker{Client: prod, Group: cfg.Group, NameBudget: cfg.NameBudget, Now: c.now, Rand: cfg.Rand}
	topics := append([]string(nil), cfg.Topics...)
	for _, t := range cfg.Topics {
		ct, ok := cfg.Contracts[t]
		if !ok {
			if ct, err = ContractOf(ctx, prod, t); err != nil {
				prod.Close()
				return nil, err
			}
		}
		c.contracts[t] = ct
		if ct.IsStrict() {
			continue // a strict topic's record is retried in place: no tiers
		}
		for tier := range ct.Backoff {
			name := c.nacker.TierTopic(t, tier)
			if err := c.nacker.ensure(ctx, name, t); err != nil {
				prod.Close()
				return nil, err
			}
			c.tiers[name] = true
			topics = append(topics, name)
		}
	}
	c.cl, err = kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(topics...), kgo.AutoCommitMarks(),
		kgo.OnPartitionsRevoked(c.revoked), kgo.OnPartitionsLost(c.drop), kgo.OnOffsetsFetched(c.fetched))...)
	if err != nil {
		prod.Close()
		return nil, err
	}
	return c, nil
}

// Client is the consuming client (to commit, or to read its state).
func (c *Consumer) Client() *kgo.Client { return c.cl }

// TierTopics are the retry tiers consumed.
func (c *Consumer) TierTopics() []string {
	out := make([]string, 0, len(c.tiers))
	for t := range c.tiers {
		out = append(out, t)
	}
	return out
}

// Close leaves the group (committing what was marked) and closes the
// clients.
func (c *Consumer) Close() {
	c.cl.Close()
	c.prod.Close()
}

// Nack writes rec's copy to its tier or the dead-letter topic (Nacker.Nack
// with the contract of rec's source topic).
func (c *Consumer) Nack(ctx context.Context, rec *kgo.Record, class string, cause error) (Result, error) {
	if err := queue.ValidateClass(class); err != nil {
		return Result{}, fmt.Errorf("retry: error class: %w", err)
	}
	src := SourceTopic(rec)
	ct, ok := c.contracts[src]
	if !ok {
		return Result{}, fmt.Errorf("retry: %s is not a source topic of this consumer", src)
	}
	if ct.IsStrict() && rec.Topic == src {
		return c.nackStrict(ctx, rec, class, cause, ct)
	}
	return c.nacker.Nack(ctx, rec, class, cause, ct)
}

// Commit marks what the last Poll handed out and commits every mark, and
// the strict partitions' states.
func (c *Consumer) Commit(ctx context.Context) error {
	c.markHanded()
	if err := c.syncStrict(ctx, true); err != nil {
		return err
	}
	return c.cl.CommitMarkedOffsets(ctx)
}

// markHanded acknowledges what the last Poll handed out: a strict
// partition's record in its lane, any other by a kgo mark.
func (c *Consumer) markHanded() {
	c.mu.Lock()
	handed := c.handed
	c.handed = nil
	marks := handed[:0:0]
	for _, r := range handed {
		if sp := c.strict[tp{r.Topic, r.Partition}]; sp != nil {
			c.settleStrict(sp, r)
		} else if c.strictOrder(r.Topic) == "" {
			marks = append(marks, r) // never a mark on a strict partition
		}
	}
	c.mu.Unlock()
	c.cl.MarkCommitRecords(marks...)
}

// Poll marks what the last Poll handed out, then returns the next records:
// source records as fetched, and tier records once due. It waits until
// there are some or ctx ends.
func (c *Consumer) Poll(ctx context.Context) ([]*kgo.Record, error) {
	c.markHanded()
	for {
		// A failed periodic commit stays due and is tried again at the
		// next interval (Commit reports it).
		_ = c.syncStrict(ctx, false)
		now := c.now()
		out, next := c.release(now)
		sout, snext := c.releaseStrict(now)
		out = append(out, sout...)
		if next.IsZero() || (!snext.IsZero() && snext.Before(next)) {
			next = snext
		}
		if len(out) > 0 {
			return c.hand(out), nil
		}
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = next.Sub(now)
		}
		if c.hasStrict() && (wait < 0 || wait > StrictSyncInterval) {
			wait = StrictSyncInterval // to commit acks and see pauses lifted over HTTP
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if wait >= 0 {
			pctx, cancel = context.WithDeadline(ctx, time.Now().Add(wait))
		}
		fs := c.cl.PollFetches(pctx)
		cancel()
		if fs.IsClientClosed() {
			return nil, kgo.ErrClientClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("retry: fetch %s-%d: %w", t, p, err)
			}
		})
		now = c.now()
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if order := c.strictOrder(r.Topic); order != "" {
				sp := c.strict[tp{r.Topic, r.Partition}]
				if sp == nil { // no offsets fetched for it: start at the record
					sp = newStrictPart(order)
					c.strict[tp{r.Topic, r.Partition}] = sp
				}
				c.offerStrict(sp, r, &out)
				return
			}
			if !c.tiers[r.Topic] {
				out = append(out, r)
				return
			}
			k := tp{r.Topic, r.Partition}
			if h := c.held[k]; len(h) > 0 {
				c.held[k] = append(h, r)
				return
			}
			if due := dueOf(r); due.After(now) {
				c.held[k] = []*kgo.Record{r}
				c.cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
				return
			}
			out = append(out, r)
		})
		c.mu.Unlock()
		if len(out) > 0 || ferr != nil {
			return c.hand(out), ferr
		}
	}
}

func (c *Consumer) hasStrict() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.strict) > 0
}

func (c *Consumer) hand(out []*kgo.Record) []*kgo.Record {
	c.mu.Lock()
	c.handed = append(c.handed, out...)
	c.mu.Unlock()
	return out
}

// release takes the held records due at now, in order per partition,
// resuming the partitions whose hold empties; next is the earliest due
// time still held (zero when none).
func (c *Consumer) release(now time.Time) (out []*kgo.Record, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resume := map[string][]int32{}
	for k, h := range c.held {
		i := 0
		for ; i < len(h); i++ {
			due := dueOf(h[i])
			if due.After(now) {
				if next.IsZero() || due.Before(next) {
					next = due
				}
				break
			}
		}
		out = append(out, h[:i]...)
		if i == len(h) {
			delete(c.held, k)
			resume[k.topic] = append(resume[k.topic], k.partition)
		} else {
			c.held[k] = h[i:]
		}
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(resume)
	}
	return out, next
}

// drop forgets the holds and unmarked handouts of revoked or lost
// partitions: their new owner reads them again from the committed offset.
func (c *Consumer) drop(_ context.Context, cl *kgo.Client, gone map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resume := map[string][]int32{}
	for t, ps := range gone {
		for _, p := range ps {
			if _, ok := c.held[tp{t, p}]; ok {
				delete(c.held, tp{t, p})
				resume[t] = append(resume[t], p)
			}
		}
	}
	kept := c.handed[:0]
	for _, r := range c.handed {
		revoked := false
		for _, p := range gone[r.Topic] {
			revoked = revoked || p == r.Partition
		}
		if !revoked {
			kept = append(kept, r)
		}
	}
	c.handed = kept
	c.dropStrictLocked(gone, resume)
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
}

// dueOf is a tier record's due time; a record without a valid history is
// due at once (it is handed out, and a nack starts its history again).
func dueOf(r *kgo.Record) time.Time {
	m, ok, err := queue.Parse(headersOf(r))
	if !ok || err != nil {
		return time.Time{}
	}
	return m.Due
}
