package runner

// faults_net.go owns the network faults beyond a whole isolation: a one-way
// partition between a leader and its followers, a flapping link, and a
// broker cut off from etcd (both ways or one way) while its peers and
// clients still reach it.
//
// Invariant: every proxy a fault here changes is healed before the fault is
// recorded as stopped (healAll heals them all again after the run).

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/netproxy"
)

// leaderOneWay loses, for 8 s, everything flowing one way between a
// partition's leader and the other brokers: either the leader's words to
// them (its fetch responses and replication messages vanish, while theirs
// arrive) or theirs to it. Half-open links are where timeouts that only
// watch one direction go wrong.
func (e *faultEnv) leaderOneWay(ctx context.Context) error {
	mesh := e.c.Mesh()
	if mesh == nil {
		return errors.New("one-way faults need the peer mesh")
	}
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	var rest []string
	for _, b := range e.others(id) {
		rest = append(rest, cluster.NodeName(b))
	}
	from, to, dir := []string{cluster.NodeName(id)}, rest, "from-leader"
	if e.rng.IntN(2) == 1 {
		from, to, dir = rest, from, "to-leader"
	}
	f := e.start("one-way", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p)), "direction": dir})
	if err := mesh.PartitionOneWay(from, to); err != nil {
		return err
	}
	sleep(ctx, 8*time.Second)
	mesh.HealAll()
	e.stop(f)
	return nil
}

// flap isolates a partition's leader from the other brokers and heals it
// again and again, every 200–800 ms, for 8 s: elections start and are
// overtaken, and connections are cut mid-request.
func (e *faultEnv) flap(ctx context.Context) error {
	mesh := e.c.Mesh()
	if mesh == nil {
		return errors.New("flapping needs the peer mesh")
	}
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	f := e.start("flap", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	deadline := time.Now().Add(8 * time.Second)
	for cut := true; time.Now().Before(deadline) && ctx.Err() == nil; cut = !cut {
		if cut {
			if err := mesh.Isolate(cluster.NodeName(id)); err != nil {
				return err
			}
		} else {
			mesh.HealAll()
		}
		sleep(ctx, 200*time.Millisecond+time.Duration(e.rng.Int64N(int64(600*time.Millisecond))))
	}
	mesh.HealAll()
	e.stop(f)
	return nil
}

// etcdCut cuts a broker (a partition's leader, or any broker) off from
// etcd for 8 s: both ways, or only its requests, or only etcd's answers.
// With its requests lost its registration lease lapses and the others take
// its partitions; with only etcd's answers lost, etcd may keep renewing the
// lease while the broker hears nothing. Either way it must stop
// acknowledging what it can no longer commit.
func (e *faultEnv) etcdCut(ctx context.Context) error {
	p, id, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	proxy := e.c.EtcdProxy(id)
	if proxy == nil {
		return errors.New("etcd faults need the cluster's own etcd behind proxies (cluster.Config.ExternalEtcd)")
	}
	dirs := []netproxy.Direction{netproxy.BothWays, netproxy.ToUpstream, netproxy.ToClient}
	dir := dirs[e.rng.IntN(len(dirs))]
	f := e.start("etcd-cut", brokerName(id)+"<->etcd", map[string]string{"partition": strconv.Itoa(int(p)), "direction": dir.String()})
	proxy.Blackhole(dir)
	sleep(ctx, 8*time.Second)
	proxy.Heal()
	e.stop(f)
	return nil
}

// isolateControllerLeader is isolateLeader aimed at a partition the
// controller leads: the followers' complaints then go to the isolated
// broker itself, and only its stepping aside as controller lets another
// broker elect (broker/isolation.go). A tick where the controller leads
// nothing injects nothing.
func (e *faultEnv) isolateControllerLeader(ctx context.Context) error {
	mesh := e.c.Mesh()
	if mesh == nil {
		return errors.New("isolating the controller needs the peer mesh")
	}
	ctl, err := e.c.Controller(ctx)
	if err != nil || ctl <= 0 {
		return nil
	}
	p := int32(-1)
	for i := range int32(partitions) {
		if id, _, err := e.c.Leader(ctx, topic, i); err == nil && id == ctl {
			p = i
			break
		}
	}
	if p < 0 {
		return nil
	}
	f := e.start("isolate-controller-leader", brokerName(ctl), map[string]string{"partition": strconv.Itoa(int(p))})
	if err := mesh.Isolate(cluster.NodeName(ctl)); err != nil {
		return err
	}
	e.waitNewLeader(ctx, p, ctl)
	sleep(ctx, 2*time.Second)
	mesh.HealAll()
	e.stop(f)
	return nil
}
