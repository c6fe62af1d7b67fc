package partition

import (
	"context"
	"fmt"
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
		<-stopped
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
