package broker

// Tiering end to end inside one process: a broker on Versity's S3 gateway
// (a real S3 server) with small uploads and no local retention; produce,
// wait for the uploads and the local deletions, replay from offset 0 with
// franz-go, after a restart and after the local log is removed.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
	"github.com/sluice-mq/sluice/wal"
)

// tieringConfigs make a topic upload every few KiB and keep nothing local
// once uploaded.
var tieringConfigs = map[string]string{
	"segment.bytes":              "4096",
	"remote.upload.bytes":        "8192",
	"remote.upload.max.delay.ms": "0",
	"local.retention.ms":         "0",
	"retention.ms":               "-1",
}

func s3BrokerConfig(t *testing.T, srv *s3test.Server) Config {
	cfg := testBrokerConfig(t)
	cfg.ObjectStore = srv.URL(fmt.Sprintf("broker-%d", time.Now().UnixNano()))
	cfg.ObjectStoreOptions = srv.Options()
	cfg.TierChunkBytes = 2048
	return cfg
}

// produceValues sends n records with distinct values, acks=all, and
// returns them in offset order.
func produceValues(t *testing.T, cl *kgo.Client, topic string, n int) []string {
	t.Helper()
	var want []string
	for i := range n {
		v := fmt.Sprintf("record-%05d-%s", i, string(make([]byte, 200)))
		want = append(want, v)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	return want
}

// produceTiered creates topic (one partition, tieringConfigs), produces n
// records to it with produceValues, and waits until most of its log is
// uploaded and deleted locally.
func produceTiered(t *testing.T, b *Broker, cl *kgo.Client, topic string, n int) []string {
	t.Helper()
	createTopic(t, cl, topic, 1, tieringConfigs)
	want := produceValues(t, cl, topic, n)
	p, err := b.PartitionOf(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "most of the log uploaded and deleted locally", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		local := p.Log().StartOffset()
		return r.RemoteEnd >= wal.Offset(n)/2 && local >= wal.Offset(n)/2, fmt.Sprintf("remote [%d, %d), local start %d", r.LogStart, r.RemoteEnd, local)
	})
	return want
}

// replayAll reads topic-0 from offset 0 to n records with a new client.
func replayAll(t *testing.T, b *Broker, topic string, n int) []string {
	t.Helper()
	return replayFrom(t, b, topic, 0, n)
}

// replayFrom reads n records of topic-0 from offset from with a new
// client, failing on any offset that goes back or repeats.
func replayFrom(t *testing.T, b *Broker, topic string, from int64, n int) []string {
	t.Helper()
	vals, _ := replayRecords(t, b, topic, from, func(got int, _ int64) bool { return got >= n })
	return vals
}

// replayRecords reads topic-0 from offset from with a new client until done
// says so (given the records read and the next offset), and returns the
// values in order and by offset. Offsets only increase; a gap is allowed
// only where no record is (a new leader's epoch-start control batch takes
// an offset no consumer is given), which the callers' expectations catch.
func replayRecords(t *testing.T, b *Broker, topic string, from int64, done func(got int, next int64) bool) ([]string, map[int64]string) {
	t.Helper()
	cl := testClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxBytes(16<<10), kgo.FetchMaxPartitionBytes(16<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var vals []string
	byOffset := map[int64]string{}
	next := from
	for !done(len(vals), next) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			// What the broker thinks of the offset the replay waits at.
			var state string
			if p, perr := b.PartitionOf(topic, 0); perr == nil {
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				hw, _, posErr := b.Position(rctx, p, wal.Offset(next))
				state = fmt.Sprintf("local log [%d, %d), remote %+v, position(%d): hw %d, err %v", p.Log().StartOffset(),
					p.Log().EndOffset(), b.RemoteRange(rctx, p), next, hw, posErr)
				rcancel()
			}
			t.Fatalf("replay stopped at %d records (next offset %d): %v; %s", len(vals), next, err, state)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error (retried): %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next {
				t.Fatalf("replay: offset %d after %d", r.Offset, next-1)
			}
			next = r.Offset + 1
			vals = append(vals, string(r.Value))
			byOffset[r.Offset] = string(r.Value)
		})
	}
	return vals, byOffset
}

// fetchRaw sends one Fetch of topic-0 at offset and returns the answer.
func fetchRaw(t *testing.T, b *Broker, cl *kgo.Client, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, b.LookupTopic(topic).Meta.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func equalValues(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d differs: %.20q, want %.20q", i, got[i], want[i])
		}
	}
}

func TestTieringReplayFromObjectStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := s3test.Start(t)
	cfg := s3BrokerConfig(t, srv)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const topic, n = "tiered", 400
	want := produceTiered(t, b, cl, topic, n)
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("ListOffsets earliest = %d, want the remote log start 0", o.Offset)
	}
	// A timestamp lookup resolves through the objects' footers.
	byTime, err := adm.ListOffsetsAfterMilli(context.Background(), 1, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := byTime.Lookup(topic, 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("ListOffsets by timestamp over remote data: %+v, want offset 0", o)
	}
	equalValues(t, replayAll(t, b, topic, n), want)
	st := b.Tiers.Stats()
	if st.RemoteReadBytes == 0 || st.ObjectsUploaded == 0 {
		t.Fatalf("no remote reads or uploads: %+v", st)
	}
	t.Logf("after the first replay: %+v, cache %+v", st, b.Rcache.Stats())

	// The HTTP API reads the same log: a group reset to earliest lands on
	// the remote log start, and a fetch from it returns the first records.
	base := "http://" + b.httpLn.Addr().String()
	if code, out := postJSON(t, base+"/v1/groups/http-replay/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"earliest"}`, topic)); code != 200 {
		t.Fatalf("reset to earliest: %d %v", code, out)
	}
	offs, err := adm.FetchOffsets(context.Background(), "http-replay")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != 0 {
		t.Fatalf("committed after the reset to earliest: %+v, want 0", o)
	}
	code, joined := postJSON(t, base+"/v1/groups/http-replay/members:join", fmt.Sprintf(`{"topics":[%q],"session_timeout_ms":10000}`, topic))
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	code, fetched := postJSON(t, base+"/v1/groups/http-replay/messages:fetch", fmt.Sprintf(
		`{"member_id":%q,"generation":%v,"topic":%q,"partition":0,"max_bytes":8192}`, joined["member_id"], joined["generation"], topic))
	if code != 200 {
		t.Fatalf("HTTP fetch from the committed offset: %d %v", code, fetched)
	}
	msgs := fetched["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatal("HTTP fetch over remote data returned nothing")
	}
	for i, m := range msgs {
		if p := m.(map[string]any)["payload"]; p != want[i] {
			t.Fatalf("HTTP message %d: %.20q, want %.20q", i, p, want[i])
		}
	}

	// After a restart, and after the whole local log is removed, the
	// replay is the same: everything below the remote end comes from S3.
	stop()
	b, stop = startStoppableBroker(t, cfg)
	equalValues(t, replayAll(t, b, topic, n), want)
	stop()
	for _, dir := range []string{"wal", "journal", "state"} { // the whole local log; etcd's data stays
		if err := os.RemoveAll(filepath.Join(cfg.DataDir, dir)); err != nil {
			t.Fatal(err)
		}
	}
	b = startBroker(t, cfg)
	p, err := b.PartitionOf(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := b.RemoteRange(context.Background(), p)
	got := replayAll(t, b, topic, int(r.RemoteEnd))
	equalValues(t, got, want[:r.RemoteEnd])
}

// A corrupted object is detected on read: the fetch gets the retriable
// KAFKA_STORAGE_ERROR and no records (never shifted data), and once the
// object is whole again the replay is exact.
func TestTieringCorruptObjectIsRetriable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := s3test.Start(t)
	prefix := fmt.Sprintf("corrupt-%d", time.Now().UnixNano())
	cfg := testBrokerConfig(t)
	cfg.ObjectStore, cfg.ObjectStoreOptions, cfg.TierChunkBytes = srv.URL(prefix), srv.Options(), 2048
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	const topic, n = "corrupt", 200
	createTopic(t, cl, topic, 1, tieringConfigs)
	want := produceValues(t, cl, topic, n)
	p, _ := b.PartitionOf(topic, 0)
	eventuallyTrue(t, "uploaded and deleted locally", func() (bool, string) {
		return p.Log().StartOffset() > 40, fmt.Sprintf("local start %d", p.Log().StartOffset())
	})
	objs, _, err := b.Tiers.Objects(context.Background(), p.TopicID(), 0)
	if err != nil || len(objs) == 0 {
		t.Fatalf("objects: %v %v", objs, err)
	}
	path := filepath.Join(srv.Dir, srv.Bucket, prefix, objs[0].Key)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The first chunk's last byte: inside its records whatever the
	// object's size (one batch of one record is a whole object at times,
	// and then a fixed position could fall in the producer snapshot,
	// which a fetch does not read).
	f, err := object.ParseFooter(orig, int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	pos, length := f.ChunkRange(0)
	bad := append([]byte(nil), orig...)
	bad[pos+length-1] ^= 0xff
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	stop() // a cold cache: the next broker reads the object again
	b = startBroker(t, cfg)
	cl = testClient(t, b)
	sp := fetchRaw(t, b, cl, topic, 0)
	if sp.ErrorCode != kerr.KafkaStorageError.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("fetch over a corrupt object: code %d, %d bytes; want KAFKA_STORAGE_ERROR and nothing", sp.ErrorCode, len(sp.RecordBatches))
	}
	if b.Tiers.Stats().ReadErrors == 0 {
		t.Fatal("the read error was not counted")
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	equalValues(t, replayAll(t, b, topic, n), want)
}

// The controller's scrub removes an orphan (an object no head, manifest or
// intent names, past the grace period) and nothing else.
func TestTieringScrubRemovesOrphans(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.ScrubInterval, cfg.TierGrace = 100*time.Millisecond, 0
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	const topic = "scrubbed"
	createTopic(t, cl, topic, 1, tieringConfigs)
	produceValues(t, cl, topic, 100)
	p, _ := b.PartitionOf(topic, 0)
	eventuallyTrue(t, "an upload", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		return r.RemoteEnd > 0, fmt.Sprintf("remote end %d", r.RemoteEnd)
	})
	objs, _, err := b.Tiers.Objects(context.Background(), p.TopicID(), 0)
	if err != nil || len(objs) == 0 {
		t.Fatalf("objects %v, %v", objs, err)
	}
	// An orphan: a well-formed key of this partition nobody names, as a
	// deposed leader's upload would leave.
	orphan := strings.Replace(objs[0].Key, ".obj", "", 1)
	orphan = orphan[:strings.LastIndex(orphan, "-")] + "-00000000-0000-4000-8000-000000000000.obj"
	if err := b.Objects.Put(context.Background(), orphan, []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	foreign := "not-sluice/readme.txt"
	if err := b.Objects.Put(context.Background(), foreign, []byte("keep me")); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the orphan removed", func() (bool, string) {
		_, err := b.Objects.Head(context.Background(), orphan)
		return errors.Is(err, objstore.ErrNotFound), fmt.Sprint(err)
	})
	for _, k := range []string{objs[0].Key, foreign} {
		if _, err := b.Objects.Head(context.Background(), k); err != nil {
			t.Fatalf("%s after the scrub: %v", k, err)
		}
	}
}

// After the loss of the whole local log the partition continues at the
// remote end with the producer state of the last object: a retry of an
// idempotent batch that was uploaded gets its original offset, not a
// duplicate, and the producer's next batch follows.
func TestTieringProducerStateSurvivesLocalLoss(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b)
	const topic = "idem-tiered"
	createTopic(t, cl, topic, 1, tieringConfigs)
	ireq := kmsg.NewPtrInitProducerIDRequest()
	iresp, err := ireq.RequestWith(context.Background(), cl)
	if err != nil || iresp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, iresp)
	}
	pid, epoch := iresp.ProducerID, iresp.ProducerEpoch
	var batches [][]byte
	var offsets []int64
	for seq := int32(0); seq < 40; seq += 5 {
		bt := brokertest.Batch(5, pid, epoch, seq, time.Now().UnixMilli())
		sp := produceRaw(t, b, cl, topic, 0, bt)
		if sp.ErrorCode != 0 {
			t.Fatalf("produce seq %d: code %d", seq, sp.ErrorCode)
		}
		batches, offsets = append(batches, bt), append(offsets, sp.BaseOffset)
	}
	p, _ := b.PartitionOf(topic, 0)
	hw, _ := p.HighWatermark()
	eventuallyTrue(t, "everything uploaded", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		return r.RemoteEnd == hw, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
	})
	stop()
	for _, dir := range []string{"wal", "journal", "state"} {
		if err := os.RemoveAll(filepath.Join(cfg.DataDir, dir)); err != nil {
			t.Fatal(err)
		}
	}
	b = startBroker(t, cfg)
	cl = testClient(t, b)
	last := len(batches) - 1
	sp := produceRaw(t, b, cl, topic, 0, batches[last])
	if sp.ErrorCode != 0 || sp.BaseOffset != offsets[last] {
		t.Fatalf("retry of the last batch after the local log was lost: code %d offset %d, want its original offset %d", sp.ErrorCode, sp.BaseOffset, offsets[last])
	}
	next := produceRaw(t, b, cl, topic, 0, brokertest.Batch(5, pid, epoch, 40, time.Now().UnixMilli()))
	if next.ErrorCode != 0 || next.BaseOffset != int64(hw) {
		t.Fatalf("the producer's next batch: code %d offset %d, want %d", next.ErrorCode, next.BaseOffset, hw)
	}
}

// Deleting a tiered topic removes its objects, manifests and heads through
// the retention machine; another topic's objects stay.
func TestTieringDeleteTopicRemovesObjects(t *testing.T) {
	cfg := testBrokerConfig(t)
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	for _, topic := range []string{"doomed", "kept"} {
		createTopic(t, cl, topic, 1, tieringConfigs)
		produceValues(t, cl, topic, 60)
	}
	remoteEnd := func(topic string) int64 {
		p, err := b.PartitionOf(topic, 0)
		if err != nil {
			return -1
		}
		return int64(b.RemoteRange(context.Background(), p).RemoteEnd)
	}
	eventuallyTrue(t, "both topics uploaded", func() (bool, string) {
		return remoteEnd("doomed") > 0 && remoteEnd("kept") > 0, fmt.Sprintf("remote ends %d, %d", remoteEnd("doomed"), remoteEnd("kept"))
	})
	doomedID, keptID := b.LookupTopic("doomed").Meta.ID, b.LookupTopic("kept").Meta.ID
	countKeys := func(id [16]byte) int {
		n := 0
		if err := b.Objects.List(context.Background(), "", func(info objstore.Info) error {
			if k, ok := tier.ParseKey(info.Key); ok && k.TopicID == id {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if countKeys(doomedID) == 0 {
		t.Fatal("no objects of the topic to delete")
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopics(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the deleted topic's objects and head gone", func() (bool, string) {
		h, err := b.Store.RemoteHead(context.Background(), doomedID, 0)
		n := countKeys(doomedID)
		return err == nil && h.Revision == 0 && n == 0, fmt.Sprintf("%d objects left, head revision %d (%v)", n, h.Revision, err)
	})
	if countKeys(keptID) == 0 || remoteEnd("kept") <= 0 {
		t.Fatal("the other topic's objects went too")
	}
}

// TestRemoteFetchHeldToItsSlice: a consumer fetch that asks for a megabyte
// of a partition below the local log is answered with at most
// RemoteFetchMaxBytes of it (whole batches, the first always), so a
// replay's answers are slices of a bounded size; a replay of the whole
// log in such slices still reads every record once, in order.
func TestRemoteFetchHeldToItsSlice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := s3test.Start(t)
	cfg := s3BrokerConfig(t, srv)
	cfg.RemoteFetchMaxBytes = 4096
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const topic, n = "sliced", 200
	want := produceTiered(t, b, cl, topic, n)
	sp := fetchRaw(t, b, cl, topic, 0) // asks for 1 MiB of the partition
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch at 0: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := len(sp.RecordBatches); got == 0 || got > int(cfg.RemoteFetchMaxBytes) {
		t.Fatalf("fetch at 0 below the local log returned %d bytes, want (0, %d]", got, cfg.RemoteFetchMaxBytes)
	}
	if got := len(sp.RecordBatches); got < int(cfg.RemoteFetchMaxBytes)/2 {
		t.Errorf("fetch at 0 returned %d bytes, less than half its slice of %d (batches of ~%d bytes)", got, cfg.RemoteFetchMaxBytes, len(want[0]))
	}
	cons := testClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	equalValues(t, got, want)
}
