package kafka

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestEndOffsetForEpochRules checks the answer for each kind of epoch
// against Kafka's LeaderEpochFileCache.endOffsetFor.
func TestEndOffsetForEpochRules(t *testing.T) {
	chain := []wal.EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 10}, {Epoch: 5, StartOffset: 15}}
	for _, tc := range []struct {
		name           string
		chain          []wal.EpochEntry
		current, e     wal.Epoch
		wantE          wal.Epoch
		wantEnd        wal.Offset
		end            wal.Offset
		currentInChain bool
	}{
		{name: "current epoch ends at the log end", chain: chain, current: 5, end: 20, e: 5, wantE: 5, wantEnd: 20},
		{name: "current epoch not in the chain yet", chain: chain, current: 7, end: 20, e: 7, wantE: 7, wantEnd: 20},
		{name: "epoch between the last entry and the current one", chain: chain, current: 7, end: 20, e: 6, wantE: 5, wantEnd: 20},
		{name: "an older epoch ends where the next begins", chain: chain, current: 5, end: 20, e: 4, wantE: 4, wantEnd: 15},
		{name: "an epoch with no batches answers the one before", chain: chain, current: 5, end: 20, e: 3, wantE: 2, wantEnd: 10},
		{name: "below the first entry", chain: chain, current: 5, end: 20, e: 1, wantE: 1, wantEnd: 0},
		{name: "above the current epoch is unknown", chain: chain, current: 5, end: 20, e: 6, wantE: -1, wantEnd: -1},
		{name: "negative epoch", chain: chain, current: 5, end: 20, e: -1, wantE: -1, wantEnd: -1},
		{name: "empty chain, older epoch", chain: nil, current: 3, end: 0, e: 1, wantE: 1, wantEnd: 0},
		{name: "empty chain, current epoch", chain: nil, current: 3, end: 0, e: 3, wantE: 3, wantEnd: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, end := endOffsetForEpoch(tc.chain, tc.current, tc.end, tc.e)
			if e != tc.wantE || end != tc.wantEnd {
				t.Fatalf("epoch %d: got (%d, %d), want (%d, %d)", tc.e, e, end, tc.wantE, tc.wantEnd)
			}
		})
	}
}

// TestListOffsetsNewLeaderBehindItsEpoch: a replica elected leader of three
// with records it cannot yet know committed has a high watermark below the
// start of its epoch until a follower catches up. Meanwhile a consumer's
// latest and timestamp lookups are OFFSET_NOT_AVAILABLE (retriable), as in
// Kafka; the earliest offset and a replica's latest (the log end) are not.
func TestListOffsetsNewLeaderBehindItsEpoch(t *testing.T) {
	l, err := wal.Open(vfs.OS, filepath.Join(t.TempDir(), "log"), wal.Config{}.WithDefaults(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, res := range l.AppendGroup([][]byte{brokertest.Batch(3, -1, -1, -1, 1000), brokertest.Batch(2, -1, -1, -1, 2000)}, 1) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	p, err := partition.Open(l, partition.Options{
		Topic: "lag", Self: 1, Queue: 16, FS: vfs.OS, SnapshotPath: filepath.Join(t.TempDir(), "p.producers"),
		ProducerExpiry: time.Hour, Now: time.Now, Metrics: node.NewMetrics(), Logger: zerolog.Nop(), Net: brokertest.QuietNet{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(ctx)
	}()
	t.Cleanup(func() { // before the log closes
		cancel()
		brokertest.RecvWithin(t, stopped, 10*time.Second, "the partition's owner to stop after its cancel")
	})
	// Elected at epoch 2 by the controller: fence, then the state.
	if !p.Step(replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 1, Epoch: 2}) ||
		!p.SetState(replica.State{Epoch: 2, Leader: 1, Replicas: []replica.NodeID{1, 2, 3}, Version: 1}) {
		t.Fatal("the partition's owner took neither the fence nor the state")
	}
	brokertest.Eventually(t, 20*time.Second, "leader of epoch 2", func() bool {
		st := p.ReplicaStatus()
		return st.Role == replica.RoleLeader && st.Epoch == 2
	})
	st := p.ReplicaStatus()
	hw, _ := p.HighWatermark()
	if st.Role != replica.RoleLeader || epochStart(l.Epochs(), 2) != 5 || hw != 0 {
		t.Fatalf("status %+v, chain %+v, HW %d: want a leader of epoch 2 from offset 5 with HW 0", st, l.Epochs(), hw)
	}
	b := &Server{Node: &node.Node{}}
	for _, tc := range []struct {
		name   string
		ts     int64
		client bool
		code   int16
		offset int64
	}{
		{"consumer latest", listLatest, true, kerr.OffsetNotAvailable.Code, -1},
		{"consumer timestamp", 1500, true, kerr.OffsetNotAvailable.Code, -1},
		{"consumer earliest", listEarliest, true, 0, 0},
		{"replica latest is the log end", listLatest, false, 0, 6},
	} {
		off, _, _, err := b.listOffsetFor(p, tc.ts, tc.client)
		if node.ErrorCode(err) != tc.code || off != tc.offset {
			t.Errorf("%s: offset %d, error %v; want offset %d, code %d", tc.name, off, err, tc.offset, tc.code)
		}
	}
}
