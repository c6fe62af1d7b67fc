package cluster

// This file owns this broker's view of the drain marks (meta/drain.go) and
// the operator's preferred elections.
//
// An operator drains a broker before stopping it (sluicectl broker drain
// N): the mark goes into etcd, every broker reads the marks every
// drainPoll, the controller's elector moves each partition led by a
// draining broker to another eligible replica (replica.Controller's
// SetDraining), and group placement (placement.go) leaves draining brokers
// out, so their groups move to a coordinator that stays. A broker deletes
// its own mark when it registers at start-up.
//
// Invariant: drains never bypass the election rules: the elector's core
// still elects only an eligible replica of a fenced quorum, and elects a
// draining one when nobody else can; group placement keeps every broker
// when all of them drain.

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/broker/replica"
)

// drainPoll is how often a broker re-reads the drain marks.
const drainPoll = time.Second

// Draining is the node ids with a drain mark as last read, sorted.
func (b *Cluster) Draining() []int32 {
	if p := b.draining.Load(); p != nil {
		return *p
	}
	return nil
}

// followDrains re-reads the drain marks every drainPoll until ctx ends. A
// failed read keeps the last view (a drain mark only moves preferences).
func (b *Cluster) followDrains(ctx context.Context) {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, drainPoll)
		ids, err := b.Store.Draining(rctx)
		cancel()
		if err == nil {
			if !slices.Equal(ids, b.Draining()) {
				b.Logger.Info().Ints32("draining", ids).Msg("drain marks changed")
			}
			b.draining.Store(&ids)
		} else if ctx.Err() == nil {
			b.Logger.Debug().Err(err).Msg("read drain marks; keeping the last view")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clearOwnDrain deletes this broker's drain mark after it registered: a
// started broker takes its preferred leaderships back. A failure is
// logged; the operator can undrain it.
func (b *Cluster) clearOwnDrain(ctx context.Context) {
	if !slices.Contains(b.Draining(), b.Cfg.NodeID) {
		ids, err := b.Store.Draining(ctx)
		if err != nil || !slices.Contains(ids, b.Cfg.NodeID) {
			return
		}
	}
	if err := b.Store.SetDraining(ctx, b.Cfg.NodeID, false); err != nil {
		b.Logger.Warn().Err(err).Msg("clear this broker's drain mark at start-up; undrain it by hand (sluicectl broker undrain)")
		return
	}
	b.Logger.Info().Msg("drain mark cleared at start-up")
}

// drainingNodes is Draining as the election core's node ids.
func (b *Cluster) drainingNodes() []replica.NodeID {
	ids := b.Draining()
	out := make([]replica.NodeID, len(ids))
	for i, id := range ids {
		out[i] = replica.NodeID(id)
	}
	return out
}

// preferNow is an operator's preferred election for the elector loop: of
// one topic's partitions (topicID != 0) or of all.
type preferNow struct {
	topicID [16]byte
	done    chan int // how many partitions were asked
}

// PreferredElection asks this broker's elector loop to move each
// partition's leadership back to its preferred replica now (of topicID's
// partitions; zero: every partition) and returns how many partitions it
// asked. handled is false when this broker runs no elector.
func (b *Cluster) PreferredElection(ctx context.Context, topicID [16]byte) (n int, handled bool, err error) {
	e := b.repl.elector.Load()
	if e == nil {
		return 0, false, nil
	}
	p := preferNow{topicID: topicID, done: make(chan int, 1)}
	select {
	case e.prefer <- p:
	case <-ctx.Done():
		return 0, true, ctx.Err()
	}
	select {
	case n := <-p.done:
		return n, true, nil
	case <-ctx.Done():
		return 0, true, ctx.Err()
	}
}

// preferNow runs in the elector loop.
func (l *electorLoop) preferNow(ctx context.Context, p preferNow) {
	n := 0
	for key, part := range l.parts {
		if p.topicID != ([16]byte{}) && key.TopicID != p.topicID {
			continue
		}
		part.ctrl.PreferNow()
		n++
		l.flush(ctx, key, part)
	}
	l.log.Info().Int("partitions", n).Msg("preferred election requested by an operator")
	p.done <- n
}
