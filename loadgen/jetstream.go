package loadgen

// This file owns the NATS JetStream peer System: a file-storage R1 stream
// per topic (subjects <stream>.<partition>), acknowledged async publishes
// with an in-flight budget (one NATS connection and one ack-collector
// goroutine per producer), and pull consumers sharing one durable consumer
// as the "group". The server's sync policy (default or sync_interval:
// always) is the server's configuration, named in Config.Label.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

type jetStreamSystem struct {
	cfg Config
	log zerolog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newJetStreamSystem(cfg Config, log zerolog.Logger) (*jetStreamSystem, error) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("loadgen-admin"))
	if err != nil {
		return nil, fmt.Errorf("loadgen: nats connect %s: %w", cfg.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadgen: jetstream: %w", err)
	}
	return &jetStreamSystem{cfg: cfg, log: log, nc: nc, js: js}, nil
}

// streamName maps a topic to a valid stream name.
func streamName(topic string) string {
	return strings.NewReplacer(".", "_", "*", "_", ">", "_", " ", "_").Replace(topic)
}

func (s *jetStreamSystem) Setup(ctx context.Context, topic string, _ int) error {
	name := streamName(topic)
	if err := s.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		s.log.Debug().Err(err).Msg("delete stream before create")
	}
	_, err := s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{name + ".*"},
		Storage:    jetstream.FileStorage,
		Replicas:   1,
		Retention:  jetstream.LimitsPolicy,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("loadgen: create stream %s: %w", name, err)
	}
	return nil
}

func (s *jetStreamSystem) GroupsSupported(context.Context) (bool, error) { return true, nil }
func (s *jetStreamSystem) OrderedPartitions() bool                       { return false }

func (s *jetStreamSystem) Teardown(ctx context.Context, topic string) error {
	if err := s.js.DeleteStream(ctx, streamName(topic)); err != nil {
		return fmt.Errorf("loadgen: delete stream: %w", err)
	}
	return nil
}

func (s *jetStreamSystem) Close() { s.nc.Close() }

func (s *jetStreamSystem) NewProducer(_ context.Context, id int) (Producer, error) {
	nc, err := nats.Connect(s.cfg.NATSURL, nats.Name(fmt.Sprintf("loadgen-producer-%d", id)))
	if err != nil {
		return nil, fmt.Errorf("loadgen: nats producer %d: %w", id, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(s.cfg.InFlight))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadgen: jetstream producer %d: %w", id, err)
	}
	p := &jsProducer{id: id, nc: nc, js: js, subject: streamName(s.cfg.Topic), idem: s.cfg.Idempotent,
		pending: make(chan jsPending, s.cfg.InFlight), closing: make(chan struct{}), done: make(chan struct{})}
	go p.collect()
	return p, nil
}

type jsPending struct {
	fut  jetstream.PubAckFuture
	done AckFunc
}

type jsProducer struct {
	id      int
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	idem    bool
	wg      sync.WaitGroup // publishes whose ack has not been handled yet
	pending chan jsPending // publish order; drained by collect
	closing chan struct{}  // closed by Close
	done    chan struct{}  // closed when collect returns
}

var errProducerClosed = errors.New("loadgen: producer closed before the acknowledgment")

func (p *jsProducer) Publish(ctx context.Context, msg *Message, done AckFunc) error {
	m := nats.NewMsg(p.subject + "." + strconv.Itoa(int(msg.Partition)))
	m.Data = msg.Value
	m.Header.Set(HeaderTimestamp, strconv.FormatInt(msg.Scheduled.UnixNano(), 10)) // headers are text
	if msg.Key != nil {
		m.Header.Set("lg-key", string(msg.Key))
	}
	var opts []jetstream.PublishOpt
	if p.idem {
		opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("%d-%d", p.id, msg.Seq)))
	}
	for {
		fut, err := p.js.PublishMsgAsync(m, opts...)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && ctx.Err() == nil {
			continue // the in-flight budget is full: wait again
		}
		if err != nil {
			return fmt.Errorf("loadgen: publish: %w", err)
		}
		p.wg.Add(1)
		select {
		case p.pending <- jsPending{fut: fut, done: done}:
			return nil
		case <-ctx.Done():
			p.wg.Done()
			return ctx.Err()
		}
	}
}

// collect hands each acknowledgment to its callback, in publish order,
// until Close.
func (p *jsProducer) collect() {
	defer close(p.done)
	for {
		select {
		case pd := <-p.pending:
			select {
			case <-pd.fut.Ok():
				pd.done(nil)
			case err := <-pd.fut.Err():
				pd.done(err)
			case <-p.closing:
				pd.done(errProducerClosed)
			}
			p.wg.Done()
		case <-p.closing:
			return
		}
	}
}

func (p *jsProducer) Flush(ctx context.Context) error {
	flushed := make(chan struct{})
	go func() { p.wg.Wait(); close(flushed) }() // ends once every pending ack is handled
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("loadgen: flush: %w", ctx.Err())
	}
}

// Close must not run concurrently with Publish.
func (p *jsProducer) Close() {
	close(p.closing)
	<-p.done
	p.nc.Close()
}

func (s *jetStreamSystem) NewConsumer(ctx context.Context, spec ConsumerSpec) (Consumer, error) {
	nc, err := nats.Connect(s.cfg.NATSURL, nats.Name(fmt.Sprintf("loadgen-consumer-%d", spec.ID)))
	if err != nil {
		return nil, fmt.Errorf("loadgen: nats consumer %d: %w", spec.ID, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadgen: jetstream consumer %d: %w", spec.ID, err)
	}
	durable := streamName(s.cfg.Group) // every member shares it, in group and assign mode alike
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName(spec.Topic), jetstream.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.SessionTimeout,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: max(s.cfg.InFlight*s.cfg.Producers, 10000),
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadgen: jetstream consumer %d: %w", spec.ID, err)
	}
	return &jsConsumer{nc: nc, cons: cons, killed: make(chan struct{}), ready: make(chan struct{})}, nil
}

type jsConsumer struct {
	nc       *nats.Conn
	cons     jetstream.Consumer
	killOnce sync.Once
	killed   chan struct{} // closed by Kill
	ready    chan struct{} // closed by Run once pulling
}

func (c *jsConsumer) Ready() <-chan struct{} { return c.ready }

func (c *jsConsumer) Run(ctx context.Context, sink Sink) error {
	cc, err := c.cons.Consume(func(m jetstream.Msg) {
		select {
		case <-c.killed:
			return // a dead member neither processes nor acknowledges
		default:
		}
		d := Delivered{Bytes: len(m.Data())}
		if i := strings.LastIndexByte(m.Subject(), '.'); i >= 0 {
			if n, err := strconv.Atoi(m.Subject()[i+1:]); err == nil {
				d.Partition = int32(n)
			}
		}
		if md, err := m.Metadata(); err == nil {
			d.Offset = int64(md.Sequence.Stream)
			d.Redelivered = md.NumDelivered > 1
		}
		if ns, err := strconv.ParseInt(m.Headers().Get(HeaderTimestamp), 10, 64); err == nil {
			d.Scheduled = time.Unix(0, ns)
		}
		sink.Deliver([]Delivered{d})
		if err := m.Ack(); err != nil {
			sink.Error(err)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		sink.Error(err)
	}))
	if err != nil {
		return fmt.Errorf("loadgen: consume: %w", err)
	}
	close(c.ready)
	select {
	case <-ctx.Done():
	case <-c.killed:
	}
	cc.Stop()
	return nil
}

func (c *jsConsumer) Kill() {
	c.killOnce.Do(func() {
		close(c.killed)
		c.nc.Close()
	})
}

func (c *jsConsumer) Close() { c.nc.Close() }
