package broker

// The broker on a failing disk, through Config.FS: a failed fsync or a full
// disk is answered with KAFKA_STORAGE_ERROR, leaves the high watermark where
// the last durable batch put it, and never lets a fetch see the failed
// batch, although its bytes sit in the page cache. kill -9 keeps the page
// cache, so only these tests can tell such bugs apart from correct code.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// armedFaults fails operations of one kind on paths containing a substring
// while armed; tests arm it between steps. (broker/partition's tests have
// the same.)
type armedFaults struct {
	armed atomic.Bool
	hits  atomic.Int64 // faults injected
	op    vfs.Op
	path  string
	err   error
}

func (a *armedFaults) inject(op vfs.Op, path string) error {
	if a.armed.Load() && op == a.op && strings.Contains(path, a.path) {
		a.hits.Add(1)
		if a.err != nil {
			return a.err
		}
		return vfs.ErrInjected
	}
	return nil
}

// faultyBroker starts a broker whose disk goes through faults, in the
// given durability mode, and a client of it.
func faultyBroker(t *testing.T, faults *armedFaults, perPartitionFsync bool) (*Broker, *kgo.Client) {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.FS = vfs.NewFaulty(vfs.OS, faults.inject)
	cfg.PerPartitionFsync = perPartitionFsync
	b := startBroker(t, cfg)
	return b, testClient(t, b)
}

// produceRaw sends one batch to topic-partition with acks=all and returns
// the partition's answer.
func produceRaw(t *testing.T, b *Broker, cl *kgo.Client, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, b.LookupTopic(topic).Meta.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// latestOffsetOf returns the high watermark ListOffsets reports for partition 0.
func latestOffsetOf(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: error %d", p.ErrorCode)
	}
	return p.Offset
}

// fetchOffsetsFrom fetches partition 0 from offset without waiting and returns
// the high watermark and the offset of every record returned.
func fetchOffsetsFrom(t *testing.T, b *Broker, cl *kgo.Client, topic string, offset int64) (int64, []int64) {
	t.Helper()
	resp, err := fetchReq(b, topic, offset, 0, 0, 1<<20, 1<<20).RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch from %d: error %d", offset, p.ErrorCode)
	}
	var offsets []int64
	raw := p.RecordBatches
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		for i := range rb.NumRecords {
			offsets = append(offsets, rb.FirstOffset+int64(i))
		}
		raw = raw[12+int(rb.Length):]
	}
	return p.HighWatermark, offsets
}

func TestStorageFaults(t *testing.T) {
	cases := []struct {
		name              string
		perPartitionFsync bool
		op                vfs.Op
		path              string
		err               error
	}{
		{"journal fsync fails", false, vfs.OpSync, ".jnl", nil},
		{"journal disk full", false, vfs.OpWrite, ".jnl", syscall.ENOSPC},
		{"segment disk full", false, vfs.OpWrite, ".log", syscall.ENOSPC},
		{"per-partition fsync fails", true, vfs.OpSync, ".log", nil},
		{"per-partition disk full", true, vfs.OpWrite, ".log", syscall.ENOSPC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			faults := &armedFaults{op: tc.op, path: tc.path, err: tc.err}
			b, cl := faultyBroker(t, faults, tc.perPartitionFsync)
			createTopic(t, cl, "disk", 1, nil)

			if p := produceRaw(t, b, cl, "disk", 0, brokertest.Batch(1, -1, -1, -1, 1)); p.ErrorCode != 0 || p.BaseOffset != 0 {
				t.Fatalf("first produce: error %d at %d", p.ErrorCode, p.BaseOffset)
			}
			faults.armed.Store(true)
			p := produceRaw(t, b, cl, "disk", 0, brokertest.Batch(2, -1, -1, -1, 1))
			if p.ErrorCode != kerr.KafkaStorageError.Code {
				t.Fatalf("produce on a failing disk: error %d at offset %d, want KAFKA_STORAGE_ERROR", p.ErrorCode, p.BaseOffset)
			}
			if hw := latestOffsetOf(t, cl, "disk"); hw != 1 {
				t.Fatalf("high watermark %d after the failed produce, want 1", hw)
			}
			hw, offsets := fetchOffsetsFrom(t, b, cl, "disk", 0)
			if hw != 1 || len(offsets) != 1 || offsets[0] != 0 {
				t.Fatalf("fetch after the failed produce: high watermark %d, offsets %v; want 1 and [0]", hw, offsets)
			}
			// The failure is sticky: the partition refuses appends until it
			// is reopened, with the same precise error.
			faults.armed.Store(false)
			if p := produceRaw(t, b, cl, "disk", 0, brokertest.Batch(1, -1, -1, -1, 1)); p.ErrorCode != kerr.KafkaStorageError.Code {
				t.Fatalf("produce after the disk recovered: error %d, want KAFKA_STORAGE_ERROR until reopened", p.ErrorCode)
			}
		})
	}
}

func TestStorageFaultIsolatedToItsPartition(t *testing.T) {
	// A segment that cannot be written fails its partition only; with
	// per-partition fsyncs, so does a segment fsync. (A journal failure is
	// the whole disk's: every partition on it fails, TestStorageFaults.)
	for _, tc := range []struct {
		name              string
		perPartitionFsync bool
		op                vfs.Op
	}{{"segment write", false, vfs.OpWrite}, {"per-partition fsync", true, vfs.OpSync}} {
		t.Run(tc.name, func(t *testing.T) {
			faults := &armedFaults{op: tc.op, path: "/0/"}
			b, cl := faultyBroker(t, faults, tc.perPartitionFsync)
			createTopic(t, cl, "two", 2, nil)
			faults.armed.Store(true)
			if p := produceRaw(t, b, cl, "two", 0, brokertest.Batch(1, -1, -1, -1, 1)); p.ErrorCode != kerr.KafkaStorageError.Code {
				t.Fatalf("partition 0 on a failing disk: error %d", p.ErrorCode)
			}
			if p := produceRaw(t, b, cl, "two", 1, brokertest.Batch(1, -1, -1, -1, 1)); p.ErrorCode != 0 {
				t.Fatalf("partition 1: error %v", kerr.ErrorForCode(p.ErrorCode))
			}
		})
	}
	var se *kerr.Error
	if !errors.As(kerr.ErrorForCode(kerr.KafkaStorageError.Code), &se) || !se.Retriable {
		t.Fatal("KAFKA_STORAGE_ERROR should be retriable for clients")
	}
}

// TestFetchBetweenHighWatermarkAndLogEnd: an offset the log holds but has
// not committed is not out of range (a consumer there after a leader change
// must not be reset); it gets an empty answer, and past the log end
// OFFSET_OUT_OF_RANGE.
func TestFetchBetweenHighWatermarkAndLogEnd(t *testing.T) {
	faults := &armedFaults{op: vfs.OpSync, path: ".jnl"}
	b, cl := faultyBroker(t, faults, false)
	createTopic(t, cl, "gap", 1, nil)
	produceRaw(t, b, cl, "gap", 0, brokertest.Batch(1, -1, -1, -1, 1))
	faults.armed.Store(true)
	produceRaw(t, b, cl, "gap", 0, brokertest.Batch(2, -1, -1, -1, 1)) // written, never synced: log end 3, HW 1
	for _, tc := range []struct {
		offset int64
		code   int16
	}{{1, 0}, {2, 0}, {3, 0}, {4, kerr.OffsetOutOfRange.Code}} {
		resp, err := fetchReq(b, "gap", tc.offset, 0, 0, 1<<20, 1<<20).RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.code || len(p.RecordBatches) != 0 || p.HighWatermark != 1 {
			t.Errorf("fetch at %d: error %d, %d record bytes, HW %d; want error %d, none, HW 1",
				tc.offset, p.ErrorCode, len(p.RecordBatches), p.HighWatermark, tc.code)
		}
	}
}

// TestLeaderEpochChecked: ListOffsets and Fetch compare the client's leader
// epoch with the partition's. (That connections may read the epoch while
// the owner changes it is broker/partition's
// TestLeaderEpochReadWhileTheOwnerChangesIt.)
func TestLeaderEpochChecked(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b)
	createTopic(t, cl, "epochs", 1, nil)
	p := b.LookupTopic("epochs").Partitions[0]
	brokertest.Eventually(t, 20*time.Second, "the partition led", func() bool { return p.ReplicaStatus().Role == replica.RoleLeader })
	e := int32(p.LeaderEpoch())
	if e < 1 {
		t.Fatalf("leader epoch %d, want at least 1", e)
	}
	for _, tc := range []struct {
		client int32
		code   int16
	}{{-1, 0}, {e, 0}, {e - 1, kerr.FencedLeaderEpoch.Code}, {e + 1, kerr.UnknownLeaderEpoch.Code}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, tc.client
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		lp := resp.Topics[0].Partitions[0]
		if lp.ErrorCode != tc.code || (tc.code == 0 && lp.LeaderEpoch != e) {
			t.Errorf("list offsets with epoch %d: error %d, leader epoch %d; want error %d", tc.client, lp.ErrorCode, lp.LeaderEpoch, tc.code)
		}
		freq := fetchReq(b, "epochs", 0, 0, 0, 1<<20, 1<<20)
		freq.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.client
		fresp, err := freq.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := fresp.Topics[0].Partitions[0].ErrorCode; code != tc.code {
			t.Errorf("fetch with epoch %d: error %d, want %d", tc.client, code, tc.code)
		}
	}
}

// TestCrashKeepsAcknowledgedRecords runs the broker on an in-memory disk,
// takes what a power cut would leave (only fsynced bytes and names) after
// acknowledged produces to several partitions, and restarts on it: every
// acknowledged record is there, replayed from the journal, since no segment
// was fsynced.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	for _, perPartition := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-partition-fsync=%v", perPartition), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testBrokerConfig(t)
			cfg.FS = mem
			cfg.PerPartitionFsync = perPartition
			b, stop := startStoppableBroker(t, cfg)
			cl := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			createTopic(t, cl, "acked", 4, nil)
			want := map[string]bool{}
			for i := range 200 {
				v := fmt.Sprintf("record-%d", i)
				r := &kgo.Record{Topic: "acked", Partition: int32(i % 4), Value: []byte(v)}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
				want[v] = true
			}
			crashed := mem.CrashClone()
			cl.Close()
			stop()

			cfg.FS = crashed
			b2 := startBroker(t, cfg)
			cl2 := testClient(t, b2, kgo.ConsumeTopics("acked"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for len(want) > 0 {
				fs := cl2.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("%d acknowledged records missing after the crash", len(want))
				}
				fs.EachRecord(func(r *kgo.Record) { delete(want, string(r.Value)) })
			}
		})
	}
}

// TestRetentionUnlinkFailureKeepsTheLog: retention that cannot remove a
// segment file keeps the file (it may still move the log start, durably,
// first); after a restart the log still ends where it did (nothing
// acknowledged lost, no offset reused) and the files are removed once they
// can be.
func TestRetentionUnlinkFailureKeepsTheLog(t *testing.T) {
	faults := &armedFaults{op: vfs.OpRemove, path: ".log"}
	cfg := testBrokerConfig(t)
	cfg.FS = vfs.NewFaulty(vfs.OS, faults.inject)
	faults.armed.Store(true)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "trim", 1, map[string]string{"segment.bytes": "1024", "retention.bytes": "2048"})
	var end int64
	for range 200 { // about 18 KiB: 18 segments of 1 KiB, 16 past retention
		p := produceRaw(t, b, cl, "trim", 0, brokertest.Batch(2, -1, -1, -1, 1))
		if p.ErrorCode != 0 {
			t.Fatalf("produce: error %d", p.ErrorCode)
		}
		end = p.BaseOffset + 2
	}
	dir := b.WalDir(b.LookupTopic("trim").Meta.ID, 0)
	segments := func() int {
		m, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	brokertest.Eventually(t, 10*time.Second, "retention tries to remove a segment", func() bool { return faults.hits.Load() > 0 })
	before := segments()
	if before < 12 {
		t.Fatalf("%d segment files: retention removed some although removal fails", before)
	}
	if hw := latestOffsetOf(t, cl, "trim"); hw != end {
		t.Fatalf("the log ends at %d after failed removals, want %d", hw, end)
	}
	cl.Close()
	stop()

	faults.armed.Store(false)
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	if hw := latestOffsetOf(t, cl2, "trim"); hw != end {
		t.Fatalf("after restart the log ends at %d, want %d", hw, end)
	}
	if got := produceRaw(t, b2, cl2, "trim", 0, brokertest.Batch(1, -1, -1, -1, 1)); got.ErrorCode != 0 || got.BaseOffset != end {
		t.Fatalf("next produce: error %d at offset %d, want offset %d (no offset reused)", got.ErrorCode, got.BaseOffset, end)
	}
	brokertest.Eventually(t, 10*time.Second, "retention removes the old segment files", func() bool { return segments() < before/2 })
}
