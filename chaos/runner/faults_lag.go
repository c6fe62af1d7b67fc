package runner

// faults_lag.go owns the lagging follower: a follower of a partition of a
// topic that is not tiered, with a retention of a few seconds, is paused
// for longer than that retention, so when it returns its log ends below the
// leader's log start. It must start again at the leader's log start
// (nothing older exists anywhere) and be back in the in-sync set; the run
// checks, after the drain, that every replica of the topic is in sync and
// that their logs agree wherever they overlap (lagCheck).
//
// A side producer keeps writing to that topic for the whole run (acks=all,
// at lagRate records a second), so the leader's log start keeps moving.
//
// Invariant: the side producer is owned by the faultEnv that started it and
// stopped by stopLag before the drain.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/replicas"
)

const (
	lagTopic      = "chaos-lag"
	lagPartitions = 1
	lagRetention  = 3 * time.Second
	lagRate       = 200 // records a second
	lagValueBytes = 200
)

// lagState is the side topic's producer, started by the first injection.
type lagState struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	acked  int
}

// lagFollower pauses one follower of the side topic's partition for three
// retentions and a little more, then resumes it.
func (e *faultEnv) lagFollower(ctx context.Context) error {
	if err := e.startLag(ctx); err != nil {
		return err
	}
	leader, _, err := e.c.Leader(ctx, lagTopic, 0)
	if err != nil || leader <= 0 {
		return nil // no leader known now: try at the next tick
	}
	fs := e.others(leader)
	if len(fs) == 0 {
		return nil
	}
	id := fs[e.rng.IntN(len(fs))]
	away := 3*lagRetention + time.Duration(e.rng.Int64N(int64(2*time.Second)))
	f := e.start("lag-follower", brokerName(id), map[string]string{"partition": "0", "away_ms": strconv.FormatInt(away.Milliseconds(), 10)})
	if err := e.c.Pause(id); err != nil {
		return err
	}
	e.paused = append(e.paused, id)
	sleep(ctx, away)
	if err := e.c.Resume(id); err != nil {
		return err
	}
	e.paused = slices.DeleteFunc(e.paused, func(b int32) bool { return b == id })
	e.stop(f)
	return nil
}

// startLag creates the side topic and starts its producer, once.
func (e *faultEnv) startLag(ctx context.Context) error {
	if e.lag != nil {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.c.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(lagTopic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	segment := strconv.Itoa(8 << 10)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, lagPartitions, 3, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("false"),
		"retention.ms":          kadm.StringPtr(strconv.FormatInt(lagRetention.Milliseconds(), 10)),
		"segment.bytes":         &segment,
	}, lagTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		cl.Close()
		return fmt.Errorf("runner: create %s: %w", lagTopic, err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.lag = &lagState{cl: cl, cancel: cancel}
	e.lag.wg.Add(1)
	go e.lag.produce(pctx)
	return nil
}

// produce sends lagRate records a second until ctx ends; failures (a
// leader paused or moving) are expected and only counted as not acked.
func (s *lagState) produce(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second / lagRate)
	defer tick.Stop()
	value := make([]byte, lagValueBytes)
	var mu sync.Mutex
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		copy(value, strconv.Itoa(n))
		s.cl.Produce(ctx, &kgo.Record{Value: slices.Clone(value)}, func(_ *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				s.acked++
				mu.Unlock()
			}
		})
	}
}

// stopLag stops the side producer, if one was started, and waits for it.
func (e *faultEnv) stopLag() int {
	if e.lag == nil {
		return 0
	}
	e.lag.cancel()
	e.lag.wg.Wait()
	e.lag.cl.Close()
	return e.lag.acked
}

// lagCheck reads every replica of the side topic and reports where two
// replicas hold different records at one offset.
func lagCheck(ctx context.Context, cl *kgo.Client, id [16]byte, replicasOf []int32) []string {
	var logs []history.ReplicaLog
	var problems []string
	for _, b := range replicasOf {
		log, err := replicas.Collect(ctx, cl, lagTopic, id, 0, b)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s/0 on broker %d unreadable: %v", lagTopic, b, err))
			continue
		}
		logs = append(logs, log)
	}
	for i := 1; i < len(logs); i++ {
		if p := firstDifference(logs[0], logs[i]); p != "" {
			problems = append(problems, p)
		}
	}
	return problems
}

// firstDifference names the first offset both logs hold with different
// records, or "".
func firstDifference(a, b history.ReplicaLog) string {
	at := map[history.Offset]history.ReplicaEntry{}
	for _, en := range a.Entries {
		at[en.Offset] = en
	}
	for _, en := range b.Entries {
		if x, ok := at[en.Offset]; ok && x.Digest != en.Digest {
			return fmt.Sprintf("%s/0: brokers %d and %d differ at offset %d", lagTopic, a.Broker, b.Broker, en.Offset)
		}
	}
	return ""
}
