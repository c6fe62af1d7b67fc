package workload

// This file owns the producers: one idempotent kgo client and one goroutine
// per producer process, issuing keyed sends at a steady rate, and the rule
// that classifies a send's result (sendOutcome).
//
// Invariant: a producer's sends are issued from its one goroutine (run), so
// their invoke order is the order the idempotent producer keeps per
// partition.
// Invariant: every send issued is recorded exactly once, from its promise;
// pending counts the promises not yet called, and stop waits for them.
// seq and rng belong to run's goroutine; the promise reads only its own
// captured values.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/history"
)

// maxBufferedRecords bounds the sends a producer holds unresolved; beyond
// it, issuing blocks (backpressure) and the rate falls behind.
const maxBufferedRecords = 1024

// maxBehind is how far a producer may fall behind its schedule before it
// gives up the backlog instead of bursting to catch up.
const maxBehind = time.Second

type producer struct {
	w       *Workload
	process history.Process
	cl      *kgo.Client

	stopLoop      context.CancelFunc // ends run
	cancelProduce context.CancelFunc // fails sends still waiting for buffer space
	done          chan struct{}      // closed when run returns
	pending       sync.WaitGroup     // promises not yet called

	rng *rand.Rand // run's goroutine only
	seq int        // run's goroutine only
}

func (w *Workload) startProducer(i int, interval time.Duration) (*producer, error) {
	process := w.newProcess()
	cl, err := kgo.NewClient(w.clientOpts(fmt.Sprintf("producer-%d", process),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(w.cfg.DeliveryTimeout),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	)...)
	if err != nil {
		return nil, fmt.Errorf("workload: producer %d: %w", i, err)
	}
	loopCtx, stopLoop := context.WithCancel(context.Background())
	produceCtx, cancelProduce := context.WithCancel(context.Background())
	p := &producer{
		w: w, process: process, cl: cl,
		stopLoop: stopLoop, cancelProduce: cancelProduce,
		done: make(chan struct{}),
		rng:  rand.New(rand.NewPCG(w.cfg.Seed, uint64(process))),
	}
	go p.run(loopCtx, produceCtx, interval)
	return p, nil
}

// run issues one send per interval until loopCtx ends. A producer that
// fell more than maxBehind behind (blocked on a full buffer) restarts its
// schedule from now.
func (p *producer) run(loopCtx, produceCtx context.Context, interval time.Duration) {
	defer close(p.done)
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-loopCtx.Done():
			return
		case <-t.C:
		}
		p.send(produceCtx)
		next = next.Add(interval)
		if now := time.Now(); now.Sub(next) > maxBehind {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// send issues one keyed send and records it when kgo resolves it.
func (p *producer) send(ctx context.Context) {
	cfg := &p.w.cfg
	k := p.rng.IntN(cfg.Keys)
	key := fmt.Sprintf("k%d", k)
	part := int32(k % int(cfg.Partitions))
	p.seq++
	value := fmt.Sprintf("%s-%d-%d", key, p.process, p.seq)
	r := &kgo.Record{Topic: cfg.Topic, Partition: part, Key: []byte(key), Value: []byte(value)}
	invoke := p.w.rec.Now()
	p.pending.Add(1)
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		defer p.pending.Done()
		ev := history.Send{
			Process: p.process, Key: key, Value: value, Partition: history.Partition(part),
			Offset: history.NoOffset, LeaderEpoch: history.NoEpoch,
			Invoke: invoke, Complete: p.w.rec.Now(),
		}
		ev.Outcome, ev.Error = sendOutcome(err)
		if ev.Outcome == history.OK {
			ev.Offset = history.Offset(r.Offset)
			if r.LeaderEpoch >= 0 {
				ev.LeaderEpoch = history.Epoch(r.LeaderEpoch)
			}
		}
		p.w.record(ev)
	})
}

// stop ends the schedule, flushes what is buffered for up to timeout,
// closes the client (failing whatever is left, as info) and waits until
// every send is recorded.
func (p *producer) stop(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	p.stopLoop()
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
		p.cancelProduce() // run is blocked on a full buffer: give up that send
		<-p.done
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	if err := p.cl.Flush(ctx); err != nil {
		p.w.log.Warn().Err(err).Int("process", int(p.process)).Msg("producer: flush did not finish; closing with sends unresolved (info)")
	}
	cancel()
	p.cancelProduce()
	p.cl.Close()
	p.pending.Wait()
}

// definiteSendErrors are the Kafka errors that guarantee a record was not
// written: they follow from the record's bytes or the producer's rights,
// which do not change between attempts, so no earlier attempt of the same
// record can have been written either. The suite changes no ACLs.
var definiteSendErrors = []*kerr.Error{
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidRecord,
	kerr.InvalidTimestamp,
	kerr.InvalidTopicException,
	kerr.UnsupportedForMessageFormat,
	kerr.UnsupportedCompressionType,
	kerr.TopicAuthorizationFailed,
	kerr.ClusterAuthorizationFailed,
}

// unknownOutcomeErrors mark a result that says nothing definite whatever
// Kafka error they may carry: the record timed out, ran out of retries, or
// its client or context ended.
var unknownOutcomeErrors = []error{
	kgo.ErrRecordTimeout,
	kgo.ErrRecordRetries,
	kgo.ErrClientClosed,
	kgo.ErrAborting,
	context.Canceled,
	context.DeadlineExceeded,
}

// sendOutcome classifies a produce result (the rule is in the package doc):
// ok for no error; fail, with the Kafka error's name, for one of
// definiteSendErrors returned as the record's own result; info, with the
// error's text, for anything else.
func sendOutcome(err error) (history.Outcome, string) {
	if err == nil {
		return history.OK, ""
	}
	for _, u := range unknownOutcomeErrors {
		if errors.Is(err, u) {
			return history.Info, err.Error()
		}
	}
	for _, d := range definiteSendErrors {
		if errors.Is(err, d) {
			return history.Fail, d.Message
		}
	}
	return history.Info, err.Error()
}
