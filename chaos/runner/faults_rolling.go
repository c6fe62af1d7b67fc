package runner

// faults_rolling.go owns the rolling restart, the one scenario an operator
// runs on purpose: each broker in turn is drained through another broker's
// admin API (its leaderships and groups move away), stopped cleanly with
// SIGTERM, started again, waited for until every partition is whole again,
// and then a preferred election spreads the leaderships back. Unlike the
// crash families, a drained restart must cost the clients nothing: the run
// is held to zero failed or unresolved sends and to a bound on how long the
// consumer group goes without records (strictChecks).
//
// Invariant: a broker is stopped only after the broker the runner asks
// reports that it leads nothing and every partition of the run's topic
// names another leader; a broker that never drains fails the run.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/workload"
)

const (
	// drainTimeout bounds the wait until a drained broker leads nothing.
	drainTimeout = 30 * time.Second
	// wholeTimeout bounds the wait until every partition is whole again
	// after a restart.
	wholeTimeout = time.Minute
	// maxStall is the longest a rolling restart may keep the consumer
	// group from any record while the producers run.
	maxStall = 5 * time.Second
	// settle is the pause before the first restart and between two.
	settle = 3 * time.Second
)

// rollingRestart restarts every broker once, in a seeded order, each
// drained first, then lets the workload run out the rest of d.
func (e *faultEnv) rollingRestart(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	order := []int32{1, 2, 3}
	e.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, id := range order {
		sleep(ctx, settle)
		if err := e.drainedRestart(ctx, id); err != nil {
			return err
		}
	}
	sleep(ctx, time.Until(deadline))
	return ctx.Err()
}

// drainedRestartOne is the family's fault for the soak: one broker, drained
// and restarted.
func (e *faultEnv) drainedRestartOne(ctx context.Context) error {
	up := e.c.Up()
	if len(up) < cluster.Size {
		return nil // another fault holds a broker: a drain could not move everything
	}
	return e.drainedRestart(ctx, up[e.rng.IntN(len(up))])
}

// drainedRestart drains broker id, stops it with SIGTERM, starts it again,
// waits until every partition of the topic is whole and asks for a
// preferred election.
func (e *faultEnv) drainedRestart(ctx context.Context, id int32) error {
	via := e.others(id)
	if len(via) == 0 {
		return fmt.Errorf("rolling restart: no other broker up to drain %s through", brokerName(id))
	}
	f := e.start("drained-restart", brokerName(id), map[string]string{"via": brokerName(via[0])})
	start := time.Now()
	if err := e.c.AdminOn(ctx, via[0], "POST", "/v1/admin/brokers/"+strconv.Itoa(int(id))+"/drain", ""); err != nil {
		return fmt.Errorf("rolling restart: drain %s: %w", brokerName(id), err)
	}
	if err := e.waitDrained(ctx, id, via[0]); err != nil {
		return err
	}
	drained := time.Since(start)
	if err := e.c.Terminate(id); err != nil {
		return fmt.Errorf("rolling restart: stop %s: %w", brokerName(id), err)
	}
	stopped := time.Since(start)
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("rolling restart: start %s: %w", brokerName(id), err)
	}
	if err := e.waitWhole(ctx); err != nil {
		return fmt.Errorf("rolling restart: after %s: %w", brokerName(id), err)
	}
	if err := e.c.AdminOn(ctx, via[0], "POST", "/v1/admin/elections:preferred", ""); err != nil {
		return fmt.Errorf("rolling restart: preferred election: %w", err)
	}
	e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
	e.log.Info().Str("broker", brokerName(id)).Int64("drained_ms", drained.Milliseconds()).Int64("stopped_ms", stopped.Milliseconds()).
		Int64("whole_ms", time.Since(start).Milliseconds()).Msg("drained restart done")
	e.stop(f)
	return nil
}

// waitDrained polls until broker via lists id as draining and leading
// nothing, and every partition of the topic names a leader other than id.
func (e *faultEnv) waitDrained(ctx context.Context, id, via int32) error {
	deadline := time.Now().Add(drainTimeout)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last = e.drainState(ctx, id, via)
		if last == "" {
			return nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("rolling restart: %s not drained after %v: %s", brokerName(id), drainTimeout, last)
}

// drainState says why id is not drained yet, or "" once it is.
func (e *faultEnv) drainState(ctx context.Context, id, via int32) string {
	bs, err := e.c.Brokers(ctx, via)
	if err != nil {
		return err.Error()
	}
	i := slices.IndexFunc(bs, func(b cluster.BrokerState) bool { return b.ID == id })
	switch {
	case i < 0:
		return "not listed"
	case !bs[i].Draining:
		return "not marked draining yet"
	case bs[i].Leaders > 0:
		return fmt.Sprintf("leads %d partitions", bs[i].Leaders)
	}
	for p := int32(0); p < partitions; p++ {
		l, _, err := e.c.Leader(ctx, topic, p)
		if err != nil {
			return err.Error()
		}
		if l == id || l < 0 {
			return fmt.Sprintf("%s/%d led by %d", topic, p, l)
		}
	}
	return ""
}

// waitWhole polls until every partition of the topic has all its replicas
// in its leader's in-sync set.
func (e *faultEnv) waitWhole(ctx context.Context) error {
	deadline := time.Now().Add(wholeTimeout)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ps, err := e.c.Sync(ctx, topic)
		last = err
		if err == nil {
			whole := len(ps) == partitions
			for _, p := range ps {
				if !p.InSync() {
					whole = false
					last = fmt.Errorf("%s/%d: leader %d, in sync %v of %v", topic, p.Partition, p.Leader, p.ISR, p.Replicas)
				}
			}
			if whole {
				return nil
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return fmt.Errorf("not every partition whole after %v: %w", wholeTimeout, errors.Join(last, ctx.Err()))
}

// Stalls are the longest stretches the consumer group went without a
// consumed record while the producers ran: over every partition, and of
// the partition that waited longest.
type Stalls struct {
	Any, Partition time.Duration
	// PartitionOf is the partition of the longest Partition stall.
	PartitionOf int32
}

// consumeStalls measures, from the group members' polls of events, the
// largest gap between two consecutive polls that returned records (over
// all partitions, and per partition), from each partition's first
// consumed record until until (when the producers stopped), the gap to
// until included.
func consumeStalls(events []history.Event, until history.Nanos) Stalls {
	var all []history.Nanos
	per := map[history.Partition][]history.Nanos{}
	for _, ev := range events {
		p, ok := ev.(history.Poll)
		if !ok || p.Group == "" || len(p.Records) == 0 || p.Complete > until {
			continue
		}
		all = append(all, p.Complete)
		per[p.Partition] = append(per[p.Partition], p.Complete)
	}
	gap := func(ts []history.Nanos) time.Duration {
		if len(ts) == 0 {
			return 0
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		ts = append(ts, until)
		var m history.Nanos
		for i := 1; i < len(ts); i++ {
			m = max(m, ts[i]-ts[i-1])
		}
		return time.Duration(m)
	}
	s := Stalls{Any: gap(all)}
	for p, ts := range per {
		if g := gap(ts); g > s.Partition {
			s.Partition, s.PartitionOf = g, int32(p)
		}
	}
	return s
}

// strictChecks are the rolling restart's own findings: any send that did
// not end acknowledged, and a stall of the consumer group (no record of any
// partition) beyond maxStall. One partition's stall is reported, not held
// to maxStall: franz-go's consumer learns a partition's new leader from a
// metadata refresh, at most one per kgo.MetadataMinAge (5 s by default), so
// each leadership move may hold one partition back for about 5 s whatever
// the broker does.
func strictChecks(st workload.Stats, s Stalls) []string {
	var out []string
	if st.SendsFailed > 0 || st.SendsUnknown > 0 {
		out = append(out, fmt.Sprintf("%d sends failed and %d ended unresolved during a drained rolling restart (want none)",
			st.SendsFailed, st.SendsUnknown))
	}
	if s.Any > maxStall {
		out = append(out, fmt.Sprintf("the consumer group read no record for %v (limit %v)",
			s.Any.Round(time.Millisecond), maxStall))
	}
	return out
}
