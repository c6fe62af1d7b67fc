package retry

// This file owns Nack (doc.go): the copy of a failed record to its retry
// tier or dead-letter topic, and the partitioner that keeps its partition.
//
// Invariant: Nack returns nil only once the copy is acknowledged by the
// broker; the copy's sluice.retry.* headers are queue.Meta.Headers of the
// record's history plus this failure, and it carries every other header of
// the record unchanged.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/queue"
)

// DefaultNameBudget is the default tenant's budget for a tier's name
// (Kafka's 249; a tenant's client sets 249 − len(tenant) − 1).
const DefaultNameBudget = 249

// ErrStrict refuses a nack on a strict topic without a Consumer: moving
// the record aside would let later records pass it, and pausing its key
// needs a Consumer's state (Consumer.Nack pauses it; doc.go, "Strict
// topics").
var ErrStrict = errors.New("retry: the topic's delivery.order is strict; the record must not be moved aside")

// Result is where a nack sent the copy.
type Result struct {
	Outcome   queue.Outcome
	Topic     string    // the tier or dead-letter topic
	Partition int32     // the copy's partition
	Offset    int64     // the copy's offset
	Due       time.Time // retry: when the copy may be delivered
	Meta      queue.Meta
	// A strict topic's record, nacked through a Consumer (strict.go):
	// Paused says its key (or partition) is paused (Topic, Partition and
	// Offset are the record's own). With Outcome Retry the record is
	// delivered again at Due; with Outcome queue.Paused (its attempts
	// exhausted, or a permanent class: Meta.DeadReason says which) Due is
	// zero and nothing of the scope is delivered until keys:resume or
	// keys:skip (Consumer.Resume, Consumer.Skip) lifts the pause.
	// Withdrawn lists the later records of the key handed out already,
	// not to be processed now (they come again after it).
	Paused    bool
	Withdrawn []int64
}

// Nacker writes copies of failed records of one group.
type Nacker struct {
	Client     *kgo.Client
	Group      string
	NameBudget int              // 0 means DefaultNameBudget
	Now        func() time.Time // nil means time.Now
	Rand       func() float64   // nil means math/rand
	created    sync.Map         // topic → struct{}: known to exist
	rndMu      sync.Mutex
	rnd        *rand.Rand
}

// Nack is (&Nacker{Client: cl, Group: group}).Nack.
func Nack(ctx context.Context, cl *kgo.Client, group string, rec *kgo.Record, class string, err error, c queue.Contract) (Result, error) {
	return (&Nacker{Client: cl, Group: group}).Nack(ctx, rec, class, err, c)
}

// SourceTopic is the source topic of rec: the sluice.retry.source.topic
// header of a retry copy, else its own topic. Nack wants its contract.
func SourceTopic(rec *kgo.Record) string {
	if m, ok, err := queue.Parse(headersOf(rec)); ok && err == nil {
		return m.SourceTopic
	}
	return rec.Topic
}

// ContractOf reads a topic's delivery contract with DescribeConfigs.
func ContractOf(ctx context.Context, cl *kgo.Client, topic string) (queue.Contract, error) {
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return queue.Contract{}, fmt.Errorf("retry: describe configs of %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return queue.Contract{}, fmt.Errorf("retry: describe configs of %s: %w", topic, err)
	}
	configs := map[string]string{}
	for _, c := range rc.Configs {
		if queue.IsConfig(c.Key) && c.Value != nil {
			configs[c.Key] = *c.Value
		}
	}
	return queue.ParseContract(configs)
}

func (n *Nacker) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

func (n *Nacker) random() float64 {
	if n.Rand != nil {
		return n.Rand()
	}
	n.rndMu.Lock()
	defer n.rndMu.Unlock()
	if n.rnd == nil {
		n.rnd = rand.New(rand.NewSource(time.Now().UnixNano()))
	}
	return n.rnd.Float64()
}

// TierTopic is the name of the group's tier of a source topic.
func (n *Nacker) TierTopic(source string, tier int) string {
	budget := n.NameBudget
	if budget == 0 {
		budget = DefaultNameBudget
	}
	return queue.RetryTopic(n.Group, source, tier, budget)
}

// Nack writes the copy of rec, which failed with class and cause, where
// c (the contract of rec's source topic) sends it.
func (n *Nacker) Nack(ctx context.Context, rec *kgo.Record, class string, cause error, c queue.Contract) (Result, error) {
	if err := queue.ValidateClass(class); err != nil {
		return Result{}, fmt.Errorf("retry: error class: %w", err)
	}
	if c.IsStrict() {
		return Result{}, fmt.Errorf("%w (%s has delivery.order=%s)", ErrStrict, SourceTopic(rec), c.Order)
	}
	now := n.now()
	hs := headersOf(rec)
	m, isCopy, perr := queue.Parse(hs)
	if !isCopy || perr != nil { // a malformed history starts again, as on the broker
		m = queue.Meta{SourceTopic: rec.Topic, SourcePartition: rec.Partition, SourceOffset: rec.Offset, Group: n.Group, FirstSeen: now}
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	m.Attempt++
	m.History = append(m.History, queue.Failure{At: now, Class: class, Error: queue.TruncateError(msg)})
	d := c.Decide(m.Attempt, class, now, n.random)
	var dest string
	if d.Outcome == queue.Retry {
		// The header holds unix ms: round up, so that a consumer reading it
		// never delivers the copy before the decided due time.
		d.Due = time.UnixMilli(d.Due.Add(time.Millisecond - time.Nanosecond).UnixMilli())
		m.Tier, m.Due, m.DeadReason = d.Tier, d.Due, ""
		dest = n.TierTopic(m.SourceTopic, d.Tier)
	} else {
		m.Tier, m.Due, m.DeadReason = -1, now, d.Reason
		dest = c.DeadLetterTopic(m.SourceTopic)
		if dest == m.SourceTopic {
			return Result{}, fmt.Errorf("retry: dead.letter.topic of %s is the topic itself", m.SourceTopic)
		}
	}
	cp, err := n.write(ctx, rec, m, dest, now)
	if err != nil {
		return Result{}, err
	}
	return Result{Outcome: d.Outcome, Topic: dest, Partition: cp.Partition, Offset: cp.Offset, Due: d.Due, Meta: m}, nil
}

// write produces rec's copy with the history m to dest (created when
// missing) in rec's partition, and returns it once acknowledged.
func (n *Nacker) write(ctx context.Context, rec *kgo.Record, m queue.Meta, dest string, now time.Time) (*kgo.Record, error) {
	if err := n.ensure(ctx, dest, m.SourceTopic); err != nil {
		return nil, err
	}
	cp := &kgo.Record{Topic: dest, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: now,
		Context: context.WithValue(ctx, keepPartition{}, true)}
	for _, h := range append(queue.WithoutRetryHeaders(headersOf(rec)), m.Headers()...) {
		cp.Headers = append(cp.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := n.Client.ProduceSync(ctx, cp).FirstErr(); err != nil {
		return nil, fmt.Errorf("retry: write the copy to %s: %w", dest, err)
	}
	return cp, nil
}

// ensure creates topic with the partition count of source when missing.
func (n *Nacker) ensure(ctx context.Context, topic, source string) error {
	if _, ok := n.created.Load(topic); ok {
		return nil
	}
	adm := kadm.NewClient(n.Client)
	tds, err := adm.ListTopics(ctx, topic, source)
	if err != nil {
		return fmt.Errorf("retry: metadata of %s: %w", topic, err)
	}
	if td, ok := tds[topic]; ok && td.Err == nil {
		n.created.Store(topic, struct{}{})
		return nil
	}
	src, ok := tds[source]
	if !ok || src.Err != nil || len(src.Partitions) == 0 {
		return fmt.Errorf("retry: source topic %s is unknown", source)
	}
	resp, err := adm.CreateTopic(ctx, int32(len(src.Partitions)), -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("retry: create %s: %w", topic, err)
	}
	n.created.Store(topic, struct{}{})
	n.Client.ForceMetadataRefresh()
	return nil
}

func headersOf(rec *kgo.Record) []queue.Header {
	out := make([]queue.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		out[i] = queue.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// keepPartition marks a copy's context: Partitioner keeps its partition.
type keepPartition struct{}

// Partitioner wraps base so that a copy Nack produces keeps its record's
// partition (modulo the destination's partitions), as the broker's copy
// does; every other record is base's. Build the client Nack uses with
// kgo.RecordPartitioner(retry.Partitioner(base)).
func Partitioner(base kgo.Partitioner) kgo.Partitioner { return partitioner{base} }

type partitioner struct{ base kgo.Partitioner }

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	return topicPartitioner{p.base.ForTopic(t)}
}

type topicPartitioner struct{ base kgo.TopicPartitioner }

func keeps(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(keepPartition{}) != nil
}

func (p topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return keeps(r) || p.base.RequiresConsistency(r)
}

func (p topicPartitioner) Partition(r *kgo.Record, n int) int {
	if keeps(r) {
		return int(r.Partition) % n
	}
	return p.base.Partition(r, n)
}

// OnNewBatch keeps a sticky base partitioner sticky.
func (p topicPartitioner) OnNewBatch() {
	if nb, ok := p.base.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
