package runner

// scenarios.go owns the fault schedules: each scenario injects one fault
// family at seeded times for the run's duration, and the heal that every
// run ends with.
//
// Invariant: a fault is recorded before it is injected; every broker that a
// fault stopped is running again (and resumed) after healAll.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/netproxy"
	"github.com/sluice-mq/sluice/chaos/workload"
)

// scenario is one fault schedule.
type scenario struct {
	doc string
	run func(ctx context.Context, e *faultEnv, d time.Duration) error
	// mesh: the brokers' links to each other go through proxies
	// (cluster.Config.PeerMesh).
	mesh bool
	// s3: the brokers reach object storage through a proxy
	// (cluster.Config.S3Proxy).
	s3 bool
}

var scenarios = map[string]scenario{
	"leader-kill": {"kill -9 a partition's leader, restart it a few seconds later; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.killLeader(ctx) })
		}, false, false},
	"leader-pause": {"SIGSTOP a partition's leader past its lease, then SIGCONT; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.pauseLeader(ctx) })
		}, false, false},
	"all-crash": {"kill -9 every broker at once, then restart them all; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.crashAll(ctx) })
		}, false, false},
	"followers-pause-leader-kill": {"SIGSTOP a partition's followers, kill -9 its leader while they are paused, resume them, restart the leader; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.killLeaderAlone(ctx) })
		}, false, false},
	"leader-isolated": {"cut a partition's leader off from the other brokers (both ways, through the peer proxies) while clients and etcd still reach it, for 8 s; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.isolateLeader(ctx) })
		}, true, false},
	"s3-faults": {"object storage cut, blackholed, slowed or dropping connections for 6 s while uploads and remote reads run; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.s3Fault(ctx) })
		}, false, true},
	"consumer-crash": {"crash a consumer-group member (no LeaveGroup) and start a new one, during rebalances; repeat",
		func(ctx context.Context, e *faultEnv, d time.Duration) error {
			return e.every(ctx, d, func(ctx context.Context) error { return e.crashMember() })
		}, false, false},
}

// faultEnv is what a scenario acts on.
type faultEnv struct {
	c      *cluster.Cluster
	w      *workload.Workload
	rec    *history.Recorder
	rng    *rand.Rand
	res    *Result
	log    zerolog.Logger
	nextID int
	paused []int32
}

// every runs fault at seeded intervals of 4–8 s until d has passed.
func (e *faultEnv) every(ctx context.Context, d time.Duration, fault func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		wait := 4*time.Second + time.Duration(e.rng.Int64N(int64(4*time.Second)))
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		if err := fault(ctx); err != nil {
			return err
		}
	}
	return nil
}

// start records a fault's start and returns it, to be stopped.
func (e *faultEnv) start(name, target string, params map[string]string) history.Fault {
	e.nextID++
	f := history.Fault{ID: e.nextID, Name: name, Target: target, Params: params, At: e.rec.Now()}
	_ = e.rec.Record(history.FaultStart{Fault: f})
	e.res.Faults[name]++
	e.log.Info().Str("fault", name).Str("target", target).Msg("fault")
	return f
}

func (e *faultEnv) stop(f history.Fault) {
	f.At = e.rec.Now()
	_ = e.rec.Record(history.FaultStop{Fault: f})
}

func brokerName(id int32) string { return "broker-" + strconv.Itoa(int(id)) }

// leaderOf picks a random partition and returns its leader.
func (e *faultEnv) leaderOf(ctx context.Context) (int32, int32, error) {
	p := int32(e.rng.IntN(partitions))
	id, _, err := e.c.Leader(ctx, topic, p)
	return p, id, err
}

// waitNewLeader polls until partition p has a leader other than old, and
// records how long that took.
func (e *faultEnv) waitNewLeader(ctx context.Context, p, old int32) {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < time.Minute {
		if id, _, err := e.c.Leader(ctx, topic, p); err == nil && id > 0 && id != old {
			e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (e *faultEnv) killLeader(ctx context.Context) error {
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil // no leader known now: try at the next tick
	}
	f := e.start("kill-leader", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	if err := e.c.Kill(id); err != nil {
		return err
	}
	e.waitNewLeader(ctx, p, id)
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

func (e *faultEnv) pauseLeader(ctx context.Context) error {
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	f := e.start("pause-leader", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	if err := e.c.Pause(id); err != nil {
		return err
	}
	e.paused = append(e.paused, id)
	e.waitNewLeader(ctx, p, id)
	// Past the lease (3 s in chaos/cluster) and then some.
	t := time.NewTimer(5 * time.Second)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if err := e.c.Resume(id); err != nil {
		return err
	}
	e.paused = e.paused[:len(e.paused)-1]
	e.stop(f)
	return nil
}

// killLeaderAlone pauses a partition's followers, lets the leader run alone
// for a moment (a correct leader acknowledges nothing of acks=all then),
// kills it, resumes the followers (one of them is elected, without what the
// leader wrote alone) and restarts the old leader, which must truncate.
func (e *faultEnv) killLeaderAlone(ctx context.Context) error {
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	var followers []int32
	for _, f := range e.c.Up() {
		if f != id {
			followers = append(followers, f)
		}
	}
	f := e.start("followers-pause-leader-kill", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	for _, b := range followers {
		if err := e.c.Pause(b); err != nil {
			return err
		}
		e.paused = append(e.paused, b)
	}
	t := time.NewTimer(2 * time.Second)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if err := e.c.Kill(id); err != nil {
		return err
	}
	for _, b := range followers {
		if err := e.c.Resume(b); err != nil {
			return err
		}
	}
	e.paused = nil
	e.waitNewLeader(ctx, p, id)
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

// isolateLeader blackholes every link between a partition's leader and the
// other brokers; clients and etcd still reach it, so it must acknowledge
// nothing it cannot commit, and the others elect a new leader.
func (e *faultEnv) isolateLeader(ctx context.Context) error {
	mesh := e.c.Mesh()
	if mesh == nil {
		return errors.New("leader-isolated needs the peer mesh")
	}
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	f := e.start("isolate-leader", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	if err := mesh.Isolate(cluster.NodeName(id)); err != nil {
		return err
	}
	e.waitNewLeader(ctx, p, id)
	t := time.NewTimer(8 * time.Second)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	mesh.HealAll()
	e.stop(f)
	return nil
}

// s3Fault applies one seeded fault to the brokers' link to object storage
// for 6 s, then heals it.
func (e *faultEnv) s3Fault(ctx context.Context) error {
	p := e.c.S3Proxy()
	if p == nil {
		return errors.New("s3-faults needs the S3 proxy")
	}
	kinds := []string{"cut", "blackhole", "delay", "drop"}
	kind := kinds[e.rng.IntN(len(kinds))]
	f := e.start("s3-"+kind, "brokers->s3", nil)
	var err error
	switch kind {
	case "cut":
		p.Cut()
	case "blackhole":
		p.Blackhole(netproxy.BothWays)
	case "delay":
		err = p.Delay(netproxy.BothWays, 300*time.Millisecond, 200*time.Millisecond)
	case "drop":
		err = p.Drop(netproxy.BothWays, 0.3)
	}
	if err != nil {
		return err
	}
	t := time.NewTimer(6 * time.Second)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	p.Heal()
	e.stop(f)
	return nil
}

func (e *faultEnv) crashAll(ctx context.Context) error {
	f := e.start("kill-all", "all", nil)
	if err := e.c.KillAll(); err != nil {
		return err
	}
	start := time.Now()
	if err := e.c.RestartAll(ctx); err != nil {
		return fmt.Errorf("restart all: %w", err)
	}
	e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
	e.stop(f)
	return nil
}

func (e *faultEnv) crashMember() error {
	i := e.rng.IntN(3)
	f := e.start("crash-member", "member-"+strconv.Itoa(i), nil)
	if _, err := e.w.RestartMember(i); err != nil {
		return err
	}
	e.stop(f)
	return nil
}

// healAll resumes paused brokers and restarts stopped ones.
func (e *faultEnv) healAll(ctx context.Context) error {
	var errs []error
	if m := e.c.Mesh(); m != nil {
		m.HealAll()
	}
	if p := e.c.S3Proxy(); p != nil {
		p.Heal()
	}
	for _, id := range e.paused {
		errs = append(errs, e.c.Resume(id))
	}
	e.paused = nil
	up := map[int32]bool{}
	for _, id := range e.c.Up() {
		up[id] = true
	}
	for id := int32(1); id <= cluster.Size; id++ {
		if !up[id] {
			errs = append(errs, e.c.Restart(ctx, id))
		}
	}
	return errors.Join(errs...)
}
