package runner

// faults_nodes.go owns the process faults beyond a leader's: kill -9 of a
// follower, of the controller, and of two brokers at once (a quorum lost:
// nothing may be acknowledged until one returns).
//
// Invariant: every broker a fault here kills is restarted before the fault
// is recorded as stopped.

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// kill kills broker id (kill -9) and notes it in e.killed.
func (e *faultEnv) kill(id int32) error {
	e.noteKilled(id)
	return e.c.Kill(id)
}

// noteKilled notes brokers about to be killed: their canaries must report
// the outage after their restart (canary.go).
func (e *faultEnv) noteKilled(ids ...int32) {
	if e.killed == nil {
		e.killed = map[int32]bool{}
	}
	for _, id := range ids {
		e.killed[id] = true
	}
}

// others returns the running brokers other than id, in id order.
func (e *faultEnv) others(id int32) []int32 {
	var out []int32
	for _, b := range e.c.Up() {
		if b != id {
			out = append(out, b)
		}
	}
	return out
}

// killFollower kills one follower of a partition (with three replicas on
// three brokers, any broker but the leader) for 3–5 s: writes go on with
// two of three, and the follower catches up when it returns.
func (e *faultEnv) killFollower(ctx context.Context) error {
	p, leader, err := e.leaderOf(ctx)
	if err != nil {
		return nil
	}
	fs := e.others(leader)
	if len(fs) == 0 {
		return nil
	}
	id := fs[e.rng.IntN(len(fs))]
	f := e.start("kill-follower", brokerName(id), map[string]string{"partition": strconv.Itoa(int(p))})
	if err := e.kill(id); err != nil {
		return err
	}
	sleep(ctx, 3*time.Second+time.Duration(e.rng.Int64N(int64(2*time.Second))))
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

// killController kills the controller and restarts it once another broker
// has taken the controller's election.
func (e *faultEnv) killController(ctx context.Context) error {
	id, err := e.c.Controller(ctx)
	if err != nil || id <= 0 {
		return nil
	}
	f := e.start("kill-controller", brokerName(id), nil)
	if err := e.kill(id); err != nil {
		return err
	}
	start := time.Now()
	for time.Since(start) < time.Minute && ctx.Err() == nil {
		if now, err := e.c.Controller(ctx); err == nil && now > 0 && now != id {
			e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

// killTwo kills two brokers at once for 3–5 s: every partition has lost its
// write quorum, so acks=all must fail or wait, and nothing the survivor
// holds alone may count as acknowledged. Both are restarted at once
// (RestartAll), so neither waits for the other's etcd member.
func (e *faultEnv) killTwo(ctx context.Context) error {
	up := e.c.Up()
	if len(up) < 3 {
		return nil
	}
	e.rng.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	two := up[:2]
	f := e.start("kill-two", brokerName(two[0])+","+brokerName(two[1]), nil)
	for _, id := range two {
		if err := e.kill(id); err != nil {
			return err
		}
	}
	sleep(ctx, 3*time.Second+time.Duration(e.rng.Int64N(int64(2*time.Second))))
	start := time.Now()
	if err := e.c.RestartAll(ctx); err != nil {
		return fmt.Errorf("restart %s and %s: %w", brokerName(two[0]), brokerName(two[1]), err)
	}
	e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
	e.stop(f)
	return nil
}
