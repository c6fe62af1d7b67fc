package broker

// The leader's and the follower's edges of a replica fetch: a partition
// whose core has not judged the fetch is left out of the answer and read
// by the follower as "ask again", never as a clean answer; a DivergingEpoch
// the follower cannot act on is not read as "no divergence".

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// blockedSyncs holds every fsync of a path containing a substring while
// armed, until released, so a partition's owner goroutine stays busy.
type blockedSyncs struct {
	armed    atomic.Bool
	path     atomic.Pointer[string]
	entered  chan struct{} // closed at the first held fsync
	release  chan struct{}
	once     sync.Once
	released sync.Once
}

func (s *blockedSyncs) inject(op vfs.Op, path string) error {
	p := s.path.Load()
	if !s.armed.Load() || op != vfs.OpSync || p == nil || !strings.Contains(path, *p) {
		return nil
	}
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.release:
	case <-time.After(30 * time.Second): // never hold a broken test for ever
	}
	return nil
}

func (s *blockedSyncs) unblock() { s.released.Do(func() { close(s.release) }) }

// A replica fetch for two partitions of one leader: partition 0 answers at
// once (a refusal: the asker is not its follower), partition 1's owner
// goroutine is stuck in an fsync, so its core never sees the fetch, which
// claims a tail the leader does not have (offset 1000, last epoch 0). The
// answer goes out with partition 0's; partition 1 must not be in it as an
// answer without error, which the follower would take as the leader's
// word that its log matches (and raise its HW over that tail).
func TestReplicaFetchLeavesOutUnjudgedPartition(t *testing.T) {
	blocks := &blockedSyncs{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := testBrokerConfig(t)
	cfg.FS = vfs.NewFaulty(vfs.OS, blocks.inject)
	cfg.PerPartitionFsync = true // fsyncs run on the partition's owner goroutine
	b := startBroker(t, cfg)
	t.Cleanup(blocks.unblock) // before the broker stops (cleanups run last first)
	cl := testClient(t, b, kgo.RequestRetries(0))
	createTopic(t, cl, "two", 2, nil)
	if p := produceRaw(t, b, cl, "two", 1, brokertest.Batch(3, -1, -1, -1, 1)); p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}
	tp := b.LookupTopic("two")
	part1 := b.WalDir(tp.Meta.ID, 1) + "/"
	blocks.path.Store(&part1)
	blocks.armed.Store(true)
	// A second batch for partition 1, whose fsync then holds its owner.
	pcl := testClient(t, b)
	go func() {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "two", tp.Meta.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 1, brokertest.Batch(1, -1, -1, -1, 1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		_, _ = req.RequestWith(context.Background(), pcl)
	}()
	select {
	case <-blocks.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("partition 1's fsync never started")
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 7, 2000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "two", tp.Meta.ID
	fetches := make([]replica.Message, 2)
	for i := range int32(2) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch = i, -1, 1000, 0
		rp.LogStartOffset, rp.PartitionMaxBytes = -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		fetches[i] = replica.Message{Type: replica.MsgFetch, From: 7, To: replica.NodeID(b.Cfg.NodeID),
			Epoch: -1, Seq: uint64(i + 1), Offset: 1000, LastEpoch: 0}
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// Read the answer as the follower's fetcher does.
	got := map[int32]replica.Message{}
	for _, st := range resp.Topics {
		for i := range st.Partitions {
			sp := &st.Partitions[i]
			got[sp.Partition] = replica.DecodeFetchAnswer(fetches[sp.Partition], sp)
		}
	}
	for i := range int32(2) {
		if _, ok := got[i]; !ok {
			got[i] = replica.UnjudgedAnswer(fetches[i])
		}
	}
	if m := got[0]; m.Err == replica.ErrNone {
		t.Fatalf("partition 0: %+v, want a refusal (7 is not its follower)", m)
	}
	if m := got[1]; m.Err == replica.ErrNone && !m.Unjudged && !m.Diverging {
		t.Fatalf("partition 1, whose core never saw the fetch, answered as matching the leader's log (HW %d): %+v", m.HW, m)
	}
}

// The follower's reading of DivergingEpoch: (epoch, end) both set is a
// divergence; -1 for the epoch means none on the wire, so an end offset
// with it is no judgement of the follower's log: the follower neither
// truncates nor takes it as matching, and asks again after its back-off.
func TestDivergingEpochDecode(t *testing.T) {
	fetch := replica.Message{Type: replica.MsgFetch, From: 2, To: 1, Epoch: 4, Seq: 9, Offset: 150, LastEpoch: 1}
	for _, tc := range []struct {
		name       string
		epoch      int32
		end        int64
		diverging  bool
		wantErr    bool
		wantEpoch  wal.Epoch
		wantEndOff wal.Offset
	}{
		{"diverging", 1, 100, true, false, 1, 100},
		{"none", -1, -1, false, false, 0, 0},
		{"end without an epoch", -1, 100, false, true, 0, 0},
		{"epoch without an end", 1, -1, false, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.HighWatermark = 120
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = tc.epoch, tc.end
			m := replica.DecodeFetchAnswer(fetch, &sp)
			if m.Diverging != tc.diverging || (m.Err != replica.ErrNone) != tc.wantErr ||
				(tc.diverging && (m.DivergingEpoch != tc.wantEpoch || m.DivergingEnd != tc.wantEndOff)) {
				t.Fatalf("decoded %+v; want diverging %v (%d,%d), error %v", m, tc.diverging, tc.wantEpoch, tc.wantEndOff, tc.wantErr)
			}
		})
	}
}
