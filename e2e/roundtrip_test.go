package e2e

// Round trips through franz-go: many concurrent acks=all producers, a
// direct consumer, exact comparison, and timestamp lookups.

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sentRecord is what a producer sent and what the broker acknowledged.
type sentRecord struct {
	key, value []byte
	headers    []kgo.RecordHeader
	timestamp  time.Time
	producer   int // goroutine that produced it
	seq        int // its index within that goroutine
	partition  int32
	offset     int64
}

// roundTripPlan is the shape of TestFranzRoundTrip's workload.
type roundTripPlan struct {
	topic      string
	partitions int32
	producers  int
	phases     int
	perPhase   int // records per producer per phase
	keySpace   int
	phaseWidth int // ms of timestamp space per phase
	t0         time.Time
}

// phaseStart is the first timestamp of phase p.
func (pl roundTripPlan) phaseStart(p int) time.Time {
	return pl.t0.Add(time.Duration(p*pl.phaseWidth) * time.Millisecond)
}

func TestFranzRoundTrip(t *testing.T) {
	const total = 100_000
	pl := roundTripPlan{
		topic:      "roundtrip",
		partitions: 8,
		producers:  4,
		phases:     10,
		keySpace:   500,
		phaseWidth: 1000,
		t0:         time.Now().Add(-time.Hour).Truncate(time.Second),
	}
	pl.perPhase = total / pl.phases / pl.producers
	b := startBroker(t, brokerOptions{})
	adm := newAdmin(t, b)
	createTopic(t, adm, pl.topic, pl.partitions, nil)

	sent := produceRoundTrip(t, b, pl)
	expected, firstOffset := expectedLog(t, pl, sent)

	consumed := consumeAll(t, b, pl.topic, pl.partitions, total)
	var counts []string
	for p := range pl.partitions {
		counts = append(counts, fmt.Sprintf("%d:%d", p, len(consumed[p])))
	}
	t.Logf("consumed %d records, per partition %s", total, strings.Join(counts, " "))
	for p := range pl.partitions {
		got, want := consumed[p], expected[p]
		if len(got) != len(want) {
			t.Errorf("partition %d: consumed %d records, acknowledged %d", p, len(got), len(want))
			continue
		}
		for i, rec := range got {
			if rec.Offset != firstOffset[p]+int64(i) {
				t.Errorf("partition %d: record %d has offset %d, want %d (contiguous from the first acknowledged)", p, i, rec.Offset, firstOffset[p]+int64(i))
				break
			}
			if err := sameRecord(want[rec.Offset], rec); err != nil {
				t.Errorf("partition %d offset %d: %v", p, rec.Offset, err)
				break
			}
		}
	}
	if t.Failed() {
		return
	}
	for _, phase := range []int{1, 5, 9} {
		checkTimestampLookup(t, adm, pl, consumed, phase)
	}
}

// produceRoundTrip runs pl's producers phase by phase on one acks=all,
// idempotent client and returns, per producer, what each sent and where it
// was acknowledged.
//
// Timestamps are explicit. Phase p uses [phaseStart(p), phaseStart(p+1))
// and starts only when phase p-1 is fully acknowledged, so in every
// partition the first record of phase p is exactly the first record whose
// timestamp is >= phaseStart(p).
func produceRoundTrip(t *testing.T, b *broker, pl roundTripPlan) [][]*sentRecord {
	t.Helper()
	cl := newClient(t, b,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(pl.topic),
		kgo.MaxBufferedRecords(20_000),
	)
	sent := make([][]*sentRecord, pl.producers)
	var (
		errMu    sync.Mutex
		firstErr error
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for phase := range pl.phases {
		var wg sync.WaitGroup
		for g := range pl.producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range pl.perPhase {
					seq := phase*pl.perPhase + i
					r := &sentRecord{
						key:       []byte("key-" + strconv.Itoa((seq*pl.producers+g)%pl.keySpace)),
						value:     []byte(fmt.Sprintf("value-g%d-s%d-%x", g, seq, seq*7919)),
						headers:   []kgo.RecordHeader{{Key: "producer", Value: []byte(strconv.Itoa(g))}, {Key: "seq", Value: []byte(strconv.Itoa(seq))}, {Key: "empty", Value: nil}},
						timestamp: pl.phaseStart(phase).Add(time.Duration((seq*13+g)%pl.phaseWidth) * time.Millisecond),
						producer:  g,
						seq:       seq,
					}
					sent[g] = append(sent[g], r)
					rec := &kgo.Record{Key: r.key, Value: r.value, Headers: r.headers, Timestamp: r.timestamp}
					cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
						if err != nil {
							errMu.Lock()
							if firstErr == nil {
								firstErr = fmt.Errorf("produce g%d seq %d: %w", g, seq, err)
							}
							errMu.Unlock()
							return
						}
						r.partition, r.offset = rec.Partition, rec.Offset
					})
				}
			}()
		}
		wg.Wait()
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("flush phase %d: %v", phase, err)
		}
		errMu.Lock()
		err := firstErr
		errMu.Unlock()
		if err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
	}
	return sent
}

// expectedLog turns acknowledgements into the log each partition must hold,
// checking on the way that they are consistent: no offset twice, one
// partition per key, each producer's records in its order, and contiguous
// offsets (nothing else was written and no leader changed; the first may be
// above 0 if the broker starts an epoch with a control batch).
func expectedLog(t *testing.T, pl roundTripPlan, sent [][]*sentRecord) (map[int32]map[int64]*sentRecord, map[int32]int64) {
	t.Helper()
	expected := make(map[int32]map[int64]*sentRecord)
	keyPartition := make(map[string]int32)
	for g := range pl.producers {
		lastOffset := make(map[int32]int64)
		for _, r := range sent[g] {
			if expected[r.partition] == nil {
				expected[r.partition] = make(map[int64]*sentRecord)
			}
			if prev, dup := expected[r.partition][r.offset]; dup {
				t.Fatalf("offset %d/%d acknowledged twice: g%d seq %d and g%d seq %d", r.partition, r.offset, prev.producer, prev.seq, r.producer, r.seq)
			}
			expected[r.partition][r.offset] = r
			if p, ok := keyPartition[string(r.key)]; ok && p != r.partition {
				t.Fatalf("key %q went to partitions %d and %d", r.key, p, r.partition)
			}
			keyPartition[string(r.key)] = r.partition
			if last, ok := lastOffset[r.partition]; ok && r.offset <= last {
				t.Fatalf("producer %d: seq %d acknowledged at %d/%d, not after its previous record at %d", g, r.seq, r.partition, r.offset, last)
			}
			lastOffset[r.partition] = r.offset
		}
	}
	if int32(len(expected)) != pl.partitions {
		t.Fatalf("records landed in %d partitions, want all %d", len(expected), pl.partitions)
	}
	firstOffset := make(map[int32]int64)
	for p, recs := range expected {
		first := int64(-1)
		for o := range recs {
			if first < 0 || o < first {
				first = o
			}
		}
		for o := first; o < first+int64(len(recs)); o++ {
			if recs[o] == nil {
				t.Fatalf("partition %d: acknowledged offsets are not contiguous: %d missing in [%d, %d)", p, o, first, first+int64(len(recs)))
			}
		}
		firstOffset[p] = first
	}
	return expected, firstOffset
}

// checkTimestampLookup asks ListOffsets for the start of phase and expects,
// per partition, the first consumed record whose timestamp is >= it.
func checkTimestampLookup(t *testing.T, adm *kadm.Client, pl roundTripPlan, consumed map[int32][]*kgo.Record, phase int) {
	t.Helper()
	target := pl.phaseStart(phase).UnixMilli()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := adm.ListOffsetsAfterMilli(ctx, target, pl.topic)
	if err != nil {
		t.Fatalf("ListOffsetsAfterMilli(%d): %v", target, err)
	}
	for p := range pl.partitions {
		var first *kgo.Record
		for _, rec := range consumed[p] {
			if rec.Timestamp.UnixMilli() >= target {
				first = rec
				break
			}
		}
		if first == nil || !first.Timestamp.Before(pl.phaseStart(phase+1)) {
			t.Fatalf("test bug: partition %d has no record in phase %d", p, phase)
		}
		lo, ok := listed.Lookup(pl.topic, p)
		switch {
		case !ok:
			t.Errorf("ListOffsetsAfterMilli(%d): partition %d missing", target, p)
		case lo.Err != nil:
			t.Errorf("ListOffsetsAfterMilli(%d): partition %d: %v", target, p, lo.Err)
		case lo.Offset != first.Offset:
			t.Errorf("ListOffsetsAfterMilli(%d): partition %d offset %d, want %d (first record with timestamp >= target)", target, p, lo.Offset, first.Offset)
		case lo.Timestamp != first.Timestamp.UnixMilli():
			t.Errorf("ListOffsetsAfterMilli(%d): partition %d timestamp %d, want %d (that record's)", target, p, lo.Timestamp, first.Timestamp.UnixMilli())
		}
	}
}

// sameRecord compares what was sent with what was consumed.
func sameRecord(want *sentRecord, got *kgo.Record) error {
	if want == nil {
		return fmt.Errorf("consumed a record that was never acknowledged at this offset: key %q value %q", got.Key, got.Value)
	}
	if !bytes.Equal(want.key, got.Key) {
		return fmt.Errorf("key %q, want %q", got.Key, want.key)
	}
	if !bytes.Equal(want.value, got.Value) {
		return fmt.Errorf("value %q, want %q", got.Value, want.value)
	}
	if !want.timestamp.Equal(got.Timestamp) {
		return fmt.Errorf("timestamp %v, want %v", got.Timestamp.UnixMilli(), want.timestamp.UnixMilli())
	}
	if len(want.headers) != len(got.Headers) {
		return fmt.Errorf("%d headers %v, want %d %v", len(got.Headers), got.Headers, len(want.headers), want.headers)
	}
	for i := range want.headers {
		if want.headers[i].Key != got.Headers[i].Key || !bytes.Equal(want.headers[i].Value, got.Headers[i].Value) {
			return fmt.Errorf("header %d = %s:%q, want %s:%q", i, got.Headers[i].Key, got.Headers[i].Value, want.headers[i].Key, want.headers[i].Value)
		}
	}
	return nil
}

// consumeAll reads topic from the start of every partition with a direct
// (non-group) consumer until want records arrived, and returns them per
// partition in the order received.
func consumeAll(t testing.TB, b *broker, topic string, partitions int32, want int) map[int32][]*kgo.Record {
	t.Helper()
	got := consumeFrom(t, b, topic, startOffsets(partitions), func(_ map[int32][]*kgo.Record, n int) (bool, string) {
		return n >= want, fmt.Sprintf("%d of %d records", n, want)
	})
	n := 0
	for _, recs := range got {
		n += len(recs)
	}
	if n != want {
		t.Fatalf("consume %s: got %d records, want %d", topic, n, want)
	}
	return got
}

func startOffsets(partitions int32) map[int32]kgo.Offset {
	offsets := make(map[int32]kgo.Offset)
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	return offsets
}

// consumeFrom reads topic from the given offsets with a direct consumer
// until done says so, failing the test at the deadline or on a fetch error.
func consumeFrom(t testing.TB, b *broker, topic string, offsets map[int32]kgo.Offset,
	done func(got map[int32][]*kgo.Record, n int) (bool, string),
) map[int32][]*kgo.Record {
	t.Helper()
	cl := newClient(t, b,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	got := make(map[int32][]*kgo.Record)
	n := 0
	for {
		ok, why := done(got, n)
		if ok {
			return got
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: deadline passed with %s", topic, why)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("consume %s: partition %d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			n++
		})
	}
}

func TestKillNineKeepsAcknowledged(t *testing.T) {
	const (
		topic      = "kill9"
		partitions = 3
		minAcked   = 3000 // acknowledged records before the kill
	)
	b := startBroker(t, brokerOptions{})
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, partitions, nil)

	type ack struct {
		partition int32
		offset    int64
		value     string
	}
	var (
		mu    sync.Mutex
		acked []ack
	)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.kafkaAddr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(3),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // the producer: streams until cancelled
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("kill9-%08d", i)
			rec := &kgo.Record{Key: []byte(strconv.Itoa(i % 97)), Value: []byte(v)}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				if err != nil {
					return // not acknowledged: no promise
				}
				mu.Lock()
				acked = append(acked, ack{r.Partition, r.Offset, v})
				mu.Unlock()
			})
		}
	}()
	stopProducer := sync.OnceFunc(func() {
		cancel()
		<-done
		cl.Close() // fails whatever is still buffered or in flight
	})
	t.Cleanup(stopProducer)

	eventually(t, 2*time.Minute, "acknowledged records before the kill", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= minAcked, fmt.Sprintf("%d acknowledged", len(acked))
	})
	b.Kill() // mid-stream: the producer is still sending
	stopProducer()

	mu.Lock()
	snapshot := append([]ack(nil), acked...)
	mu.Unlock()
	t.Logf("%d records acknowledged before SIGKILL", len(snapshot))

	b.Restart()
	adm = newAdmin(t, b)
	waitTopicReady(t, adm, topic, partitions)
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	ends, err := adm.ListEndOffsets(lctx, topic)
	lcancel()
	if err != nil {
		t.Fatalf("ListEndOffsets after restart: %v", err)
	}
	maxAcked := make(map[int32]int64)
	for _, a := range snapshot {
		maxAcked[a.partition] = max(maxAcked[a.partition], a.offset)
	}
	for p := range int32(partitions) {
		lo, ok := ends.Lookup(topic, p)
		if !ok || lo.Err != nil {
			t.Fatalf("end offset of partition %d after restart: %v", p, lo.Err)
		}
		if m, ok := maxAcked[p]; ok && lo.Offset <= m {
			t.Errorf("partition %d: high watermark %d after restart, but offset %d was acknowledged", p, lo.Offset, m)
		}
	}
	if t.Failed() {
		return
	}
	// Read until every partition has been read past its highest
	// acknowledged offset (records may follow, e.g. unacknowledged ones
	// that made it to disk; control batches are never delivered).
	consumed := consumeFrom(t, b, topic, startOffsets(partitions), func(got map[int32][]*kgo.Record, _ int) (bool, string) {
		for p, m := range maxAcked {
			recs := got[p]
			if len(recs) == 0 || recs[len(recs)-1].Offset < m {
				last := int64(-1)
				if len(recs) > 0 {
					last = recs[len(recs)-1].Offset
				}
				return false, fmt.Sprintf("partition %d read to %d, acknowledged up to %d", p, last, m)
			}
		}
		return true, ""
	})
	byOffset := make(map[int32]map[int64]string)
	for p, recs := range consumed {
		byOffset[p] = make(map[int64]string, len(recs))
		for _, r := range recs {
			byOffset[p][r.Offset] = string(r.Value)
		}
	}
	lost := 0
	for _, a := range snapshot {
		got, ok := byOffset[a.partition][a.offset]
		if !ok || got != a.value {
			if lost < 10 {
				t.Errorf("acknowledged %q at %d/%d; after kill -9 and restart found %q (present %v)", a.value, a.partition, a.offset, got, ok)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost or changed", lost, len(snapshot))
	}

	// Offsets only increase: a new record lands after everything acknowledged.
	pcl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer pcancel()
	r, err := pcl.ProduceSync(pctx, &kgo.Record{Key: []byte("after"), Value: []byte("after-restart")}).First()
	if err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
	if m, ok := maxAcked[r.Partition]; ok && r.Offset <= m {
		t.Errorf("record produced after restart got offset %d/%d, not above acknowledged %d", r.Partition, r.Offset, m)
	}

	// A clean stop (SIGTERM, exit 0) and start keeps it too.
	pcl.Close()
	b.Stop()
	b.Restart()
	again := consumeFrom(t, b, topic, map[int32]kgo.Offset{r.Partition: kgo.NewOffset().At(r.Offset)},
		func(_ map[int32][]*kgo.Record, n int) (bool, string) { return n >= 1, "waiting for the record" })
	if got := again[r.Partition][0]; got.Offset != r.Offset || string(got.Value) != "after-restart" {
		t.Errorf("after a clean restart: %q at %d/%d, want %q at %d", got.Value, got.Partition, got.Offset, "after-restart", r.Offset)
	}
}
