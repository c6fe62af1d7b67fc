package e2e

// Idempotent producers: a retry
// after a lost acknowledgement is not appended twice, and the sequence
// window fences zombies, gaps and bad epochs with exact error codes.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestIdempotentRetryThroughCuttingProxy(t *testing.T) {
	const (
		topic      = "idem-cut"
		partitions = 4
		total      = 4000
		wantCuts   = 5
	)
	// Drop the acknowledgements of a few Produce requests spread over the
	// stream: the 3rd, 13th, 23rd, ... Produce response the broker sends.
	proxy := newCutProxy(t, func(n int64) bool { return n%10 == 3 && n <= 10*wantCuts })
	b := startBrokerBehindProxy(t, proxy, brokerOptions{})
	createTopic(t, newAdmin(t, b), topic, partitions, nil)

	// Small batches, so several thousand records make well over
	// 10*wantCuts Produce requests.
	cl := newProxiedClient(t, b, proxy,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1024),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	type ack struct {
		partition int32
		offset    int64
	}
	var (
		mu     sync.Mutex
		acks   = make(map[string]ack, total) // value -> where it was acknowledged
		errs   []string
		values = make([]string, total)
	)
	for i := range total {
		values[i] = fmt.Sprintf("idem-%05d-%s", i, strings.Repeat("x", 64))
		cl.Produce(ctx, &kgo.Record{Value: []byte(values[i])}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", r.Value[:10], err))
				return
			}
			acks[string(r.Value)] = ack{r.Partition, r.Offset}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	mu.Lock()
	if len(errs) > 0 {
		t.Fatalf("%d records failed, first: %s", len(errs), errs[0])
	}
	mu.Unlock()
	t.Logf("%d Produce responses through the proxy, %d of them dropped after the broker appended", proxy.produceResponses.Load(), proxy.cuts.Load())
	if got := proxy.cuts.Load(); got != wantCuts {
		t.Fatalf("proxy dropped %d Produce responses, want %d (too few Produce requests to exercise retries?)", got, wantCuts)
	}

	// Read everything back: each value exactly once, offsets 0..n-1 per
	// partition, and each where its acknowledgement said.
	got := consumeAll(t, b, topic, partitions, total)
	seen := make(map[string]ack, total)
	for p := range int32(partitions) {
		for i, r := range got[p] {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d; offsets must be contiguous from 0", p, i, r.Offset)
			}
			v := string(r.Value)
			if prev, dup := seen[v]; dup {
				t.Fatalf("%.10s appears twice: %d/%d and %d/%d", v, prev.partition, prev.offset, p, r.Offset)
			}
			seen[v] = ack{p, r.Offset}
		}
	}
	for _, v := range values {
		where, ok := seen[v]
		switch {
		case !ok:
			t.Errorf("%.10s was acknowledged but is not in the log", v)
		case where != acks[v]:
			t.Errorf("%.10s acknowledged at %d/%d but read at %d/%d", v, acks[v].partition, acks[v].offset, where.partition, where.offset)
		}
	}
}

// idempotentBatch is encodeBatch with a producer id, epoch and base
// sequence, and the CRC recomputed over them.
func idempotentBatch(pid int64, epoch int16, seq int32, timestamp int64, values ...string) []byte {
	var recs []kv
	for _, v := range values {
		recs = append(recs, kv{nil, []byte(v)})
	}
	raw := encodeBatch(0, timestamp, recs...)
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// initProducerID asks for a fresh idempotent producer id over a raw
// connection.
func initProducerID(t testing.TB, addr string, vs map[int16]versionRange) (int64, int16) {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(pickVersion(t, vs, req, 4))
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := kmsg.NewPtrInitProducerIDResponse()
	rc.roundTrip(req, resp)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil || resp.ProducerID < 0 {
		t.Fatalf("InitProducerId v%d: id %d epoch %d error %v", req.Version, resp.ProducerID, resp.ProducerEpoch, err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func TestZombieProducerFenced(t *testing.T) {
	const topic = "idem-zombie"
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	vs := brokerVersions(t, b.kafkaAddr)
	produceV := pickVersion(t, vs, kmsg.NewPtrProduceRequest(), lastNamedVersion)
	fetchV := pickVersion(t, vs, kmsg.NewPtrFetchRequest(), lastNamedVersion)
	pid, epoch0 := initProducerID(t, b.kafkaAddr, vs)
	if epoch0 != 0 {
		t.Fatalf("InitProducerId gave epoch %d, want 0", epoch0)
	}
	now := time.Now().UnixMilli()

	// Two producers share pid: the old one at epoch 0 (the zombie) and its
	// replacement at epoch 1. Each step sends one batch on its own
	// connection; the steps run in order and depend on each other.
	steps := []struct {
		name     string
		epoch    int16
		seq      int32
		values   []string
		wantCode int16
		wantBase int64 // checked when wantCode is 0
	}{
		{"epoch0-first", 0, 0, []string{"a0", "a1"}, 0, 0},
		{"epoch0-next", 0, 2, []string{"a2"}, 0, 2},
		{"epoch1-starts-at-0", 1, 0, []string{"b0", "b1"}, 0, 3},
		{"zombie-epoch0", 0, 3, []string{"zombie"}, kerr.InvalidProducerEpoch.Code, 0},
		{"epoch1-next", 1, 2, []string{"b2", "b3"}, 0, 5},
		{"new-epoch2-at-seq5", 2, 5, []string{"c5"}, kerr.OutOfOrderSequenceNumber.Code, 0},
		{"epoch1-gap", 1, 5, []string{"gap"}, kerr.OutOfOrderSequenceNumber.Code, 0},
		{"epoch1-retry-last", 1, 2, []string{"b2", "b3"}, 0, 5},
		{"epoch1-retry-earlier", 1, 0, []string{"b0", "b1"}, 0, 3},
		{"zombie-epoch0-retry", 0, 2, []string{"a2"}, kerr.InvalidProducerEpoch.Code, 0},
		{"epoch1-continues", 1, 4, []string{"b4"}, 0, 7},
	}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			batch := idempotentBatch(pid, st.epoch, st.seq, now, st.values...)
			got := produceRaw(t, b.kafkaAddr, produceV, -1, topic, 0, batch)
			if got.ErrorCode != st.wantCode {
				t.Fatalf("pid %d epoch %d seq %d: error %s, want %s", pid, st.epoch, st.seq, codeName(got.ErrorCode), codeName(st.wantCode))
			}
			if st.wantCode == 0 && got.BaseOffset != st.wantBase {
				t.Fatalf("pid %d epoch %d seq %d: base offset %d, want %d", pid, st.epoch, st.seq, got.BaseOffset, st.wantBase)
			}
		})
		if !ok {
			return // later steps assume this one's outcome
		}
	}

	// The log holds every accepted batch once and nothing rejected.
	want := []string{"a0", "a1", "a2", "b0", "b1", "b2", "b3", "b4"}
	p := fetchRaw(t, b.kafkaAddr, fetchV, topic, 0, 0)
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("fetch %s/0: %v", topic, err)
	}
	if p.HighWatermark != int64(len(want)) {
		t.Errorf("high watermark %d, want %d", p.HighWatermark, len(want))
	}
	recs := decodeBatches(t, p.RecordBatches)
	var gotValues []string
	for i, r := range recs {
		if r.offset != int64(i) {
			t.Errorf("record %d at offset %d", i, r.offset)
		}
		gotValues = append(gotValues, string(r.value))
	}
	if strings.Join(gotValues, ",") != strings.Join(want, ",") {
		t.Errorf("log holds %v, want %v", gotValues, want)
	}
}
