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

// scenario is one fault schedule and the cluster it needs.
type scenario struct {
	doc string
	run func(ctx context.Context, e *faultEnv, d time.Duration) error
	// fault is one injection of the family (nil for mixes).
	fault func(*faultEnv, context.Context) error
	// needs is what the cluster must have for the scenario's faults.
	needs needs
	// strict holds the run to strictChecks: no send may fail or stay
	// unresolved, and the consumer group may not stall (a rolling restart
	// must cost the clients nothing).
	strict bool
}

// needs are the optional parts of a chaos cluster (cluster.Config).
type needs struct {
	mesh     bool // the brokers' links to each other go through proxies
	s3       bool // the brokers reach object storage through a TCP proxy
	s3faults bool // … and through an S3 protocol fault proxy (chaos/s3fault)
	etcd     bool // the cluster's own etcd, each broker behind a proxy
	disk     bool // each data dir a small tmpfs (implies etcd)
	tenants  bool // security on: a SASL listener for tenants' users, an admin
	canary   bool // every broker runs its AZ's canary, checked at the end (canary.go)
	// librdkafka: the workload adds an idempotent librdkafka producer
	// (confluent-kafka-python, workload.Config.LibrdkafkaProducers).
	librdkafka bool
}

// repeat builds a scenario that runs one fault at seeded intervals.
func repeat(doc string, n needs, fault func(*faultEnv, context.Context) error) scenario {
	return scenario{doc: doc, needs: n, fault: fault, run: func(ctx context.Context, e *faultEnv, d time.Duration) error {
		return e.every(ctx, d, func(ctx context.Context) error { return fault(e, ctx) })
	}}
}

// families are the fault families, each with what it needs; the scenarios
// of one family and the soak, which mixes them all, are built from it.
var families = map[string]scenario{
	"leader-kill": repeat("kill -9 a partition's leader, restart it once a new leader is elected; repeat (with the brokers' canaries)",
		needs{canary: true}, (*faultEnv).killLeader),
	"follower-kill": repeat("kill -9 one follower of a partition for 3–5 s; repeat",
		needs{}, (*faultEnv).killFollower),
	"controller-kill": repeat("kill -9 the controller, restart it once another broker controls; repeat",
		needs{}, (*faultEnv).killController),
	"two-kill": repeat("kill -9 two brokers at once for 3–5 s (every write quorum lost), restart both; repeat",
		needs{}, (*faultEnv).killTwo),
	"all-crash": repeat("kill -9 every broker at once, each losing what it had not fsynced, then restart them all; repeat (with the brokers' canaries)",
		needs{canary: true}, (*faultEnv).crashAll),
	"leader-pause": repeat("SIGSTOP a partition's leader past its lease, then SIGCONT; repeat",
		needs{}, (*faultEnv).pauseLeader),
	"followers-pause-leader-kill": repeat("SIGSTOP a partition's followers, kill -9 its leader while they are paused, resume them, restart the leader; repeat",
		needs{}, (*faultEnv).killLeaderAlone),
	"leader-isolated": repeat("cut a partition's leader off from the other brokers (both ways, through the peer proxies) while clients and etcd still reach it, for 8 s; repeat",
		needs{mesh: true}, (*faultEnv).isolateLeader),
	"controller-isolated": repeat("cut the controller, when it leads a partition, off from the other brokers (both ways) until another leader is elected, then 2 s more; repeat",
		needs{mesh: true}, (*faultEnv).isolateControllerLeader),
	"one-way": repeat("lose everything flowing one way between a partition's leader and the other brokers for 8 s; repeat",
		needs{mesh: true}, (*faultEnv).leaderOneWay),
	"flapping": repeat("isolate a partition's leader from the other brokers and heal it, every 200–800 ms for 8 s; repeat",
		needs{mesh: true}, (*faultEnv).flap),
	"etcd-cut": repeat("cut a partition's leader off from etcd (both ways, or one way) for 8 s while clients and peers still reach it; repeat",
		needs{etcd: true}, (*faultEnv).etcdCut),
	"s3-faults": repeat("object storage cut, blackholed, slowed or dropping connections for 6 s while uploads and remote reads run; repeat",
		needs{s3: true}, (*faultEnv).s3Fault),
	"s3-errors": repeat("S3 answers 500 and 503 SlowDown, loses responses after PUTs took effect, truncates GET bodies and lags, for 6 s; repeat",
		needs{s3faults: true}, (*faultEnv).s3Errors),
	"disk-full": repeat("fill a broker's data directory (a small tmpfs) to its last bytes for 6 s, then free it; repeat",
		needs{etcd: true, disk: true}, (*faultEnv).diskFull),
	"clock-jump": repeat("jump one broker's clock 1 min to 2 h forward or back for 6 s, then back; repeat",
		needs{}, (*faultEnv).clockJump),
	"disk-loss": repeat("kill -9 broker c; kill -9 broker b, wipe its data dir and restart it empty; kill -9 broker a and restart c; restart a 3–5 s later; repeat",
		needs{etcd: true}, (*faultEnv).diskLoss),
	"lagging-follower": repeat("pause a follower of a partition of an untiered topic with a 3 s retention for three retentions and more, then resume it; repeat",
		needs{}, (*faultEnv).lagFollower),
	"noisy-tenant": repeat("a second tenant with a 256 KiB/s produce quota bursts to ten times it for 6 s beside the workload; repeat (its acknowledged bytes must stay within the quota, the workload's acks above a floor)",
		needs{tenants: true}, (*faultEnv).noisyBurst),
	"large-payloads": repeat("beside the workload, payloads of 64 KiB–3 MiB uploaded through the brokers and published as envelopes, consumed by a commit-gating group; S3 fails during sessions, S3 GETs fail during consumption, or the producer drops the publish after an upload (an orphan), for 6 s; repeat (every acknowledged envelope's object must read back with its sha256, no orphan published, no commit past an unverified payload)",
		needs{s3faults: true}, (*faultEnv).largeFault),
	"rolling-restart": {doc: "restart every broker once, one at a time, each drained first through another broker's admin API " +
		"(it leads nothing), stopped with SIGTERM, started, caught up, then a preferred election; no send of the franz-go " +
		"producers nor of a librdkafka producer may fail and the consumer group may not go 5 s without a record",
		needs: needs{librdkafka: true}, strict: true, fault: (*faultEnv).drainedRestartOne,
		run: func(ctx context.Context, e *faultEnv, d time.Duration) error { return e.rollingRestart(ctx, d) }},
	"poison": repeat("beside the workload, keyed records with poison ones among them on a relaxed and a per-key-strict side topic, "+
		"consumed through the HTTP queue API (nack to retry tiers and the DLQ; on the strict topic a pause, then keys:skip or "+
		"keys:resume by an operator); each injection sends a burst of poison records while a strict partition's leader, a queue "+
		"group's coordinator or every broker is killed -9; repeat (every acknowledged record processed or dead-lettered with its "+
		"history, never neither; per-key order on the strict topic)",
		needs{}, (*faultEnv).poisonFault),
	"consumer-crash": repeat("crash a consumer-group member (no LeaveGroup) and start a new one, during rebalances; repeat",
		needs{}, func(e *faultEnv, _ context.Context) error { return e.crashMember() }),
}

// faultEnv is what a scenario acts on.
type faultEnv struct {
	c      *cluster.Cluster
	w      *workload.Workload
	rec    *history.Recorder
	rng    *rand.Rand
	res    *Result
	log    zerolog.Logger
	dir    string // the run's directory: clock files (faults_clock.go)
	nextID int
	paused []int32
	filled []int32 // brokers whose disk a fault has filled
	// killed are the brokers a fault killed (kill -9) since their data dir
	// was last wiped: each one's canary must report, after its restart,
	// the outage its kill caused (canary.go). Set by kill and crashAll.
	killed map[int32]bool
	has    needs       // the optional parts of the cluster
	lag    *lagState   // the lagging-follower family's side topic, once made
	noisy  *noisyState // the noisy-tenant family's tenant, once made
	large  *largeState // the large-payloads family's side workload, once made
	poison *poisonSide // the poison family's side topics and queue consumers, once made
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
	if err := e.kill(id); err != nil {
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
	if err := e.kill(id); err != nil {
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
	e.noteKilled(append(e.c.Up(), e.paused...)...) // KillAll kills paused brokers too
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
	if p := e.c.S3Faults(); p != nil {
		p.Heal()
	}
	for id := int32(1); id <= cluster.Size; id++ {
		if p := e.c.EtcdProxy(id); p != nil {
			p.Heal()
		}
		errs = append(errs, e.setClock(id, 0))
	}
	for _, id := range e.filled {
		errs = append(errs, e.c.FreeDisk(id))
	}
	e.filled = nil
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
