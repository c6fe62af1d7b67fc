package e2e

// Retention: whole segments past retention.ms are deleted, the log start
// moves up, reads below it fail with OFFSET_OUT_OF_RANGE and never return
// shifted data, and the newest records stay readable.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRetention(t *testing.T) {
	const (
		topic     = "retention"
		perRound  = 10
		retention = "1000" // ms
	)
	b := startBroker(t, brokerOptions{})
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, map[string]*string{"retention.ms": strp(retention), "segment.ms": strp("100")})
	cl := newClient(t, b,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)

	round := 0
	produceRound := func() []*kgo.Record {
		t.Helper()
		var recs []*kgo.Record
		for i := range perRound {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("round-%d-%d", round, i))})
		}
		round++
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
		return recs
	}
	logStart := func() int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		so, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("ListStartOffsets: %v", err)
		}
		lo, ok := so.Lookup(topic, 0)
		if !ok || lo.Err != nil {
			t.Fatalf("ListStartOffsets %s/0: %v", topic, lo.Err)
		}
		return lo.Offset
	}

	// Keep producing (so segments roll on segment.ms) until retention has
	// deleted at least one whole segment.
	var start int64
	eventually(t, 90*time.Second, "log start above 0", func() (bool, string) {
		produceRound()
		start = logStart()
		return start > 0, fmt.Sprintf("log start %d after %d rounds", start, round)
	})
	t.Logf("log start %d after %d rounds of %d records", start, round, perRound)

	fetchV := pickVersion(t, brokerVersions(t, b.kafkaAddr), kmsg.NewPtrFetchRequest(), lastNamedVersion)
	for _, off := range []int64{0, start - 1} {
		p := fetchRaw(t, b.kafkaAddr, fetchV, topic, 0, off)
		if p.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("Fetch v%d at %d (log start %d): error %s with %d bytes of records, want %s",
				fetchV, off, start, codeName(p.ErrorCode), len(p.RecordBatches), codeName(kerr.OffsetOutOfRange.Code))
		}
	}

	// The newest records are still there, at the offsets they were given.
	last := produceRound()
	got := consumeFrom(t, b, topic, map[int32]kgo.Offset{0: kgo.NewOffset().At(last[0].Offset)},
		func(got map[int32][]*kgo.Record, n int) (bool, string) {
			return n >= len(last), fmt.Sprintf("%d of %d newest records", n, len(last))
		})
	for i, want := range last {
		r := got[0][i]
		if r.Offset != want.Offset || string(r.Value) != string(want.Value) {
			t.Errorf("newest record %d: %q at %d, want %q at %d", i, r.Value, r.Offset, want.Value, want.Offset)
		}
	}
}
