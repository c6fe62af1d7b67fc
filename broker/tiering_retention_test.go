package broker

// Retention of a tiered topic through days of an injected clock, and
// DeleteRecords below the local log: the log start follows retention.ms
// and DeleteRecords, reads below it fail with OFFSET_OUT_OF_RANGE, and the
// objects wholly below it are deleted after the grace period, oldest first,
// while everything above stays readable.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestTieringRetentionThroughDays(t *testing.T) {
	clock := &testClock{now: time.Now()}
	cfg := testBrokerConfig(t)
	cfg.Now, cfg.TierGrace = clock.Now, time.Hour
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	const topic, days, perDay = "thirty-days", 40, 10
	configs := map[string]string{"retention.ms": fmt.Sprint((30 * 24 * time.Hour).Milliseconds())}
	for k, v := range tieringConfigs {
		if k != "retention.ms" {
			configs[k] = v
		}
	}
	createTopic(t, cl, topic, 1, configs)
	p, _ := b.PartitionOf(topic, 0)
	dayStart := make([]int64, days) // first offset of each day
	keyOfDay := map[int]string{}    // the object that starts with it
	for d := range days {
		var rs []*kgo.Record
		for i := range perDay {
			rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "day %d record %d", d, i), Timestamp: clock.Now()})
		}
		res := cl.ProduceSync(context.Background(), rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		dayStart[d] = res[0].Record.Offset
		hw, _ := p.HighWatermark()
		eventuallyTrue(t, fmt.Sprintf("day %d uploaded", d), func() (bool, string) {
			r := b.RemoteRange(context.Background(), p)
			return r.RemoteEnd == hw, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
		})
		objs, _, err := b.Tiers.Objects(context.Background(), p.TopicID(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if int64(o.Base) == dayStart[d] {
				keyOfDay[d] = o.Key
			}
		}
		if keyOfDay[d] == "" {
			t.Fatalf("day %d: no object starts at %d", d, dayStart[d])
		}
		clock.Advance(24 * time.Hour)
	}
	// Now is day 40: days 0..9 are older than 30 days. The log start moves
	// past them at once; their objects go only after the grace period.
	earliest := func() int64 {
		o, err := adm.ListStartOffsets(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := o.Lookup(topic, 0)
		return l.Offset
	}
	eventuallyTrue(t, "the log start at day 10", func() (bool, string) {
		return earliest() == dayStart[10], fmt.Sprintf("earliest %d, day 10 starts at %d", earliest(), dayStart[10])
	})
	exists := func(key string) bool {
		_, err := b.Objects.Head(context.Background(), key)
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	// Day 9 expired only with the last day: the grace period that covers
	// its readers began no earlier than now, so its object is still there
	// until the clock moves on, whatever the maintenance passes did.
	if !exists(keyOfDay[9]) {
		t.Fatal("day 9's object deleted before the grace period ran")
	}
	// The clock moves on in small steps (the passes are asynchronous: a
	// grace period may begin after any step) up to six hours, which passes
	// no day after 10 (day 11 expires a day later).
	var moved time.Duration
	eventuallyTrue(t, "days 0..9 deleted after the grace", func() (bool, string) {
		if moved < 6*time.Hour {
			clock.Advance(10 * time.Minute)
			moved += 10 * time.Minute
		}
		for d := range 10 {
			if exists(keyOfDay[d]) {
				return false, fmt.Sprintf("day %d's object is still there %v later", d, moved)
			}
		}
		return true, ""
	})
	for d := 11; d < days; d++ {
		if !exists(keyOfDay[d]) {
			t.Fatalf("day %d's object deleted, within retention", d)
		}
	}
	// A read below the log start fails clearly; from it, every record.
	if _, err := b.ReadRemote(context.Background(), p, wal.Offset(dayStart[5]), 1<<20); !errors.Is(err, wal.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	hw, _ := p.HighWatermark()
	// (Hours on, day 10 may be past retention too: replay from day 11.)
	got := replayFrom(t, b, topic, dayStart[11], int(int64(hw)-dayStart[11]))
	if got[0] != "day 11 record 0" || got[len(got)-1] != fmt.Sprintf("day %d record %d", days-1, perDay-1) {
		t.Fatalf("replay from the log start: %q ... %q", got[0], got[len(got)-1])
	}

	// DeleteRecords below the local log moves the remote log start.
	to := dayStart[20] + 3
	// A retriable error (REQUEST_TIMED_OUT when the etcd head's write is
	// slow on a loaded machine) is retried, as a Kafka client does.
	eventuallyTrue(t, fmt.Sprintf("DeleteRecords to %d", to), func() (bool, string) {
		resp, err := adm.DeleteRecords(context.Background(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: to}}})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.Lookup(topic, 0)
		if r.Err != nil && kerr.IsRetriable(r.Err) {
			return false, r.Err.Error()
		}
		if r.Err != nil || r.LowWatermark != to {
			t.Fatalf("DeleteRecords to %d: %+v", to, r)
		}
		return true, ""
	})
	if e := earliest(); e != to {
		t.Fatalf("earliest after DeleteRecords: %d, want %d", e, to)
	}
	if code := fetchRaw(t, b, cl, topic, dayStart[15]).ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the DeleteRecords start: code %d, want OFFSET_OUT_OF_RANGE", code)
	}
}

// getGate holds every object GET while closed, as a slow store would hold a
// reader in the middle of its read.
type getGate struct {
	objstore.Store
	closed  atomic.Bool
	entered chan struct{} // one value when the first GET is held
	release chan struct{} // closed to let held GETs through
	once    sync.Once
}

func (g *getGate) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if g.closed.Load() && strings.HasSuffix(key, ".obj") {
		g.once.Do(func() { g.entered <- struct{}{} })
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Get(ctx, key, off, n)
}

// A consumer reading remote data while DeleteRecords moves the log start
// past it finishes its read: the objects stay for the grace period, through
// every retention pass that runs meanwhile, and go after it.
func TestTieringReaderOutlivesDeleteRecords(t *testing.T) {
	clock := &testClock{now: time.Now()}
	store := &getGate{Store: mem.New(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := testBrokerConfig(t)
	cfg.Objects = store
	cfg.Now, cfg.TierGrace = clock.Now, time.Hour
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	const topic = "read-while-deleted"
	createTopic(t, cl, topic, 1, tieringConfigs)
	produceValues(t, cl, topic, 60)
	p, _ := b.PartitionOf(topic, 0)
	hw, _ := p.HighWatermark()
	clock.Advance(time.Minute) // the records are past local.retention.ms=0
	eventuallyTrue(t, "everything uploaded and gone locally", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		return r.RemoteEnd == hw && p.Log().StartOffset() > 0, fmt.Sprintf("remote end %d, hw %d, local start %d", r.RemoteEnd, hw, p.Log().StartOffset())
	})
	objs, _, err := b.Tiers.Objects(context.Background(), p.TopicID(), 0)
	if err != nil || len(objs) == 0 || objs[0].Base != 0 {
		t.Fatalf("objects %+v, %v", objs, err)
	}

	// A consumer's fetch from 0 is held inside its first object GET (until
	// the test lets it go, or ends: the broker stops only after that).
	letGo := sync.OnceFunc(func() { close(store.release) })
	t.Cleanup(letGo)
	store.closed.Store(true)
	reader := testClient(t, b)
	type fetched struct {
		part kmsg.FetchResponseTopicPartition
		err  error
	}
	done := make(chan fetched, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 100
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, b.LookupTopic(topic).Meta.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), reader)
		if err != nil {
			done <- fetched{err: err}
			return
		}
		done <- fetched{part: resp.Topics[0].Partitions[0]}
	}()
	select {
	case <-store.entered:
	case r := <-done:
		t.Fatalf("the fetch finished without reading the store: %+v", r)
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the fetch to read the store")
	}

	// DeleteRecords moves the log start past everything it reads.
	adm := kadm.NewClient(cl)
	resp, err := adm.DeleteRecords(context.Background(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: int64(hw)}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != int64(hw) {
		t.Fatalf("DeleteRecords to %d: %+v", hw, r)
	}
	eventuallyTrue(t, "a grace period for the objects below the new start", func() (bool, string) {
		h, err := b.Store.RemoteHead(context.Background(), p.TopicID(), 0)
		return err == nil && h.PendingClean == int64(hw), fmt.Sprintf("head %+v, %v", h, err)
	})
	// Two more uploads, each a maintenance pass: the retention step of at
	// least one whole pass ran after the grace period began.
	for i := range 2 {
		produceValues(t, cl, topic, 1)
		end, _ := p.HighWatermark()
		eventuallyTrue(t, fmt.Sprintf("upload %d after DeleteRecords", i), func() (bool, string) {
			r := b.RemoteRange(context.Background(), p)
			return r.RemoteEnd == end, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, end)
		})
	}
	clock.Advance(cfg.TierGrace / 2)
	for _, o := range objs {
		if _, err := store.Head(context.Background(), o.Key); err != nil {
			t.Fatalf("%s deleted within the grace period, under a reader: %v", o.Key, err)
		}
	}

	// The held read goes on and returns the records it was reading.
	letGo()
	var r fetched
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the held fetch")
	}
	if r.err != nil || r.part.ErrorCode != 0 || len(r.part.RecordBatches) == 0 {
		t.Fatalf("the held fetch: error %v, code %d, %d bytes", r.err, r.part.ErrorCode, len(r.part.RecordBatches))
	}
	if h, err := wal.ParseBatchHeader(r.part.RecordBatches); err != nil || h.BaseOffset != 0 {
		t.Fatalf("the held fetch's first batch: %+v, %v; want the one at offset 0", h, err)
	}

	// After the grace period the objects go.
	clock.Advance(cfg.TierGrace)
	eventuallyTrue(t, "the objects below the start deleted after the grace", func() (bool, string) {
		for _, o := range objs {
			if _, err := store.Head(context.Background(), o.Key); !errors.Is(err, objstore.ErrNotFound) {
				return false, fmt.Sprintf("%s: %v", o.Key, err)
			}
		}
		return true, ""
	})
}
