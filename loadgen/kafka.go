package loadgen

// This file owns the Kafka-protocol System on franz-go: topic setup with
// kadm, one client per producer and per consumer member, and the killable
// dialer that lets a member crash without leaving its group or committing.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const joinGroupKey = 11

type kafkaSystem struct {
	cfg   Config
	log   zerolog.Logger
	admin *kgo.Client
	fetch *Histogram // every consumer's Fetch round trips (fetchlatency.go)
}

func newKafkaSystem(cfg Config, log zerolog.Logger) (*kafkaSystem, error) {
	sec, err := cfg.Security.opts(nil)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, sec...)...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: kafka admin client: %w", err)
	}
	return &kafkaSystem{cfg: cfg, log: log, admin: cl, fetch: NewHistogram()}, nil
}

func (s *kafkaSystem) Setup(ctx context.Context, topic string, partitions int) error {
	adm := kadm.NewClient(s.admin)
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		s.log.Debug().Err(err).Str("topic", topic).Msg("delete before create")
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(s.cfg.ReplicationFactor), topicConfigs(s.cfg.TopicConfigs), topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("loadgen: create topic %s: %w", topic, err)
	}
	// Wait until metadata shows every partition with a leader.
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == partitions {
				ready := true
				for _, p := range t.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: wait for topic %s: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *kafkaSystem) GroupsSupported(ctx context.Context) (bool, error) {
	vs, err := kadm.NewClient(s.admin).ApiVersions(ctx)
	if err != nil {
		return false, fmt.Errorf("loadgen: api versions: %w", err)
	}
	answered := false
	for _, v := range vs {
		if v.Err != nil {
			continue
		}
		answered = true
		if _, ok := v.KeyMaxVersion(joinGroupKey); !ok {
			return false, nil
		}
	}
	if !answered {
		return false, fmt.Errorf("loadgen: api versions: no broker answered")
	}
	return true, nil
}

func (s *kafkaSystem) OrderedPartitions() bool { return true }

func (s *kafkaSystem) Teardown(ctx context.Context, topic string) error {
	if _, err := kadm.NewClient(s.admin).DeleteTopics(ctx, topic); err != nil {
		return fmt.Errorf("loadgen: delete topic %s: %w", topic, err)
	}
	return nil
}

func (s *kafkaSystem) Close() { s.admin.Close() }

func (s *kafkaSystem) NewProducer(_ context.Context, id int) (Producer, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.DefaultProduceTopic(s.cfg.Topic),
		kgo.ClientID(fmt.Sprintf("loadgen-producer-%d", id)),
		kgo.ProducerLinger(s.cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(s.cfg.BatchBytes)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(s.cfg.InFlight),
		kgo.MaxBufferedBytes(256 << 20),
		kgo.RecordRetries(10),
	}
	switch s.cfg.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !s.cfg.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	sec, err := s.cfg.Security.opts(nil)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, sec...)...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: kafka producer %d: %w", id, err)
	}
	return &kafkaProducer{cl: cl}, nil
}

type kafkaProducer struct{ cl *kgo.Client }

func (p *kafkaProducer) Publish(ctx context.Context, msg *Message, done AckFunc) error {
	rec := &kgo.Record{
		Key:       msg.Key,
		Value:     msg.Value,
		Timestamp: msg.Scheduled,
		Headers:   []kgo.RecordHeader{{Key: HeaderTimestamp, Value: encodeTimestamp(msg.Scheduled)}},
	}
	p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done(err) })
	return nil
}

func (p *kafkaProducer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("loadgen: flush: %w", err)
	}
	return nil
}

func (p *kafkaProducer) Close() { p.cl.Close() }

func (s *kafkaSystem) NewConsumer(_ context.Context, spec ConsumerSpec) (Consumer, error) {
	d := &killDialer{conns: map[net.Conn]struct{}{}}
	c := &kafkaConsumer{dialer: d, killed: make(chan struct{}), ready: make(chan struct{})}
	start := kgo.NewOffset().AtEnd()
	if spec.FromStart {
		start = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(fmt.Sprintf("loadgen-consumer-%d", spec.ID)),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithHooks(fetchHook{s.fetch}),
	}
	sec, err := s.cfg.Security.opts(d.DialContext)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	if spec.Group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(spec.Group),
			kgo.ConsumeTopics(spec.Topic),
			kgo.ConsumeResetOffset(start),
			kgo.SessionTimeout(s.cfg.SessionTimeout),
			kgo.HeartbeatInterval(max(s.cfg.SessionTimeout/6, 100*time.Millisecond)),
			kgo.AutoCommitInterval(s.cfg.CommitInterval),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				if len(m[spec.Topic]) > 0 {
					c.readyOnce.Do(func() { close(c.ready) })
				}
			}),
		)
	} else {
		parts := make(map[int32]kgo.Offset, len(spec.Partitions))
		for _, p := range spec.Partitions {
			parts[p] = start
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.Topic: parts}))
		c.readyOnce.Do(func() { close(c.ready) })
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: kafka consumer %d: %w", spec.ID, err)
	}
	c.cl = cl
	return c, nil
}

type kafkaConsumer struct {
	cl        *kgo.Client
	dialer    *killDialer
	killOnce  sync.Once
	killed    chan struct{} // closed by Kill
	readyOnce sync.Once
	ready     chan struct{} // closed on the first assignment of the topic's partitions
}

func (c *kafkaConsumer) Ready() <-chan struct{} { return c.ready }

func (c *kafkaConsumer) Run(ctx context.Context, sink Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with Run: cancel above or Kill
		select {
		case <-c.killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	var batch []Delivered
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				sink.Error(err)
			}
		})
		batch = batch[:0]
		fetches.EachRecord(func(r *kgo.Record) {
			d := Delivered{Partition: r.Partition, Offset: r.Offset, Bytes: len(r.Value)}
			for _, h := range r.Headers {
				if h.Key == HeaderTimestamp {
					d.Scheduled = decodeTimestamp(h.Value)
				}
			}
			batch = append(batch, d)
		})
		if len(batch) > 0 {
			sink.Deliver(batch)
		}
	}
}

// Kill drops every connection and refuses new ones, so the member neither
// heartbeats, commits nor leaves: the group sees a crash.
func (c *kafkaConsumer) Kill() {
	c.killOnce.Do(func() {
		c.dialer.kill()
		close(c.killed)
	})
}

// leaveTimeout bounds a clean LeaveGroup at the end of a run; the
// measurements are taken by then.
const leaveTimeout = 3 * time.Second

func (c *kafkaConsumer) Close() {
	timeout := leaveTimeout
	select {
	case <-c.killed:
		timeout = 0 // a crashed member does not leave
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_ = c.cl.LeaveGroupContext(ctx) // on timeout the leave finishes in the background
	cancel()
	c.cl.Close()
}

// killDialer tracks its connections so Kill can drop them all.
type killDialer struct {
	mu     sync.Mutex
	dead   bool                  // guarded by mu
	conns  map[net.Conn]struct{} // guarded by mu
	dialer net.Dialer
}

var errKilled = errors.New("loadgen: member killed")

func (d *killDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil, errKilled
	}
	c, err := d.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		_ = c.Close() // refused: the member is dead
		return nil, errKilled
	}
	d.conns[c] = struct{}{}
	return c, nil
}

func (d *killDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for c := range d.conns {
		_ = c.Close() // cutting the member off is the point
	}
	d.conns = nil
}
