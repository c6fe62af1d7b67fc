package partition

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// quietNet drops the core's messages to the controller and its fetches.
type quietNet struct{}

func (quietNet) SendToController(replica.Message) {}
func (quietNet) FetchReady(int32, *Partition)     {}
func (quietNet) LeaseHeld() bool                  { return true }

// TestLeaderEpochReadWhileTheOwnerChangesIt: connection goroutines read the
// leader epoch and the replica status while the owner moves through
// elections (the race detector watches this test); what they see never
// goes back.
func TestLeaderEpochReadWhileTheOwnerChangesIt(t *testing.T) {
	fs := vfs.NewMem()
	l, err := wal.Open(fs, "log", wal.Config{}.WithDefaults(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(l, Options{Topic: "epochs", Self: 1, Queue: 16, FS: fs, Now: time.Now,
		Logger: zerolog.Nop(), Net: quietNet{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		recvWithin(t, stopped, "the owner to stop after its cancel")
		_ = l.Close()
	})

	const last = 50
	stop := make(chan struct{})
	defer close(stop)
	readerDone := make(chan error, 1)
	go func() {
		var seen wal.Epoch
		for seen < last {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			e, st := p.LeaderEpoch(), p.ReplicaStatus()
			if e < seen || st.Epoch < seen {
				readerDone <- fmt.Errorf("leader epoch went back: saw %d, then %d (status %d)", seen, e, st.Epoch)
				return
			}
			seen = e
		}
		readerDone <- nil
	}()
	for e := wal.Epoch(1); e <= last; e++ {
		if !p.Step(replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 1, Epoch: e}) ||
			!p.SetState(replica.State{Epoch: e, Leader: 1, Replicas: []replica.NodeID{1}, Version: int64(e)}) {
			t.Fatalf("the owner refused the election of epoch %d", e)
		}
	}
	select {
	case err := <-readerDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("leader epoch %d after 20s, want %d", p.LeaderEpoch(), last)
	}
	if st := p.ReplicaStatus(); st.Role != replica.RoleLeader || st.Epoch != last {
		t.Fatalf("status %+v, want the leader of epoch %d", st, last)
	}
}

// leaseNet is a Net whose registration lease can be taken away.
type leaseNet struct {
	quietNet
	held func() bool
}

func (n leaseNet) LeaseHeld() bool { return n.held() }

// TestAcksOneNeedsTheLease: a leader that can no longer be sure of its
// registration lease (paused or cut off past it) answers acks=1 with
// NOT_LEADER_OR_FOLLOWER, since a new leader may never have seen the batch;
// acks=all is answered from the high watermark, which no deposed leader
// can move.
func TestAcksOneNeedsTheLease(t *testing.T) {
	fs := vfs.NewMem()
	l, err := wal.Open(fs, "log", wal.Config{}.WithDefaults(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var held atomic.Bool
	held.Store(true)
	p, err := Open(l, Options{Topic: "lease", Self: 1, Queue: 16, FS: fs, Now: time.Now,
		Logger: zerolog.Nop(), Net: leaseNet{held: held.Load}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		recvWithin(t, stopped, "the owner to stop after its cancel")
		_ = l.Close()
	})
	if !p.Step(replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 1, Epoch: 1}) ||
		!p.SetState(replica.State{Epoch: 1, Leader: 1, Replicas: []replica.NodeID{1}, Version: 1}) {
		t.Fatal("the owner refused the election")
	}
	// The election reaches the owner through ctl, a produce through its
	// queue: wait until it leads.
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for p.ReplicaStatus().Role != replica.RoleLeader {
		select {
		case <-deadline.C:
			t.Fatalf("not leading after 5s: %+v", p.ReplicaStatus())
		case <-poll.C:
		}
	}
	produce := func(acksAll bool) AppendResult {
		t.Helper()
		raw := testBatch(1, -1, -1, -1, 1)
		h, err := wal.ParseBatchHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		r := NewAppendRequest(raw, h, acksAll)
		if err := p.Enqueue(r); err != nil {
			t.Fatal(err)
		}
		return recvWithin(t, r.Result(), "the answer to a produce")
	}
	if res := produce(false); res.Err != nil {
		t.Fatalf("acks=1 with the lease held: %v", res.Err)
	}
	held.Store(false)
	if res := produce(false); !errors.Is(res.Err, ErrNotLeader) || errors.Is(res.Err, ErrNotAppended) {
		t.Fatalf("acks=1 without the lease: %+v, want ErrNotLeader, not marked ErrNotAppended (the batch is in the log)", res)
	}
	if res := produce(true); res.Err != nil {
		t.Fatalf("acks=all without the lease: %v (the high watermark decides)", res.Err)
	}
}
