package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecordsDirect sends one DeleteRecords for topic/partition straight to
// b (not sharded by the client, so unknown partitions reach the broker).
func deleteRecordsDirect(t *testing.T, b *Broker, cl *kgo.Client, topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl.Broker(int(b.Cfg.NodeID)))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func startOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	starts, err := adm.ListStartOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := starts.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("list start offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// TestDeleteRecords: kadm's DeleteRecords moves the log start; ListOffsets
// earliest and Fetch report it, fetching below it is OFFSET_OUT_OF_RANGE, and
// it survives a restart on the same data directory.
func TestDeleteRecords(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("100")}, "dr"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // one batch, and one segment, per record
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dr", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := adm.DeleteRecords(ctx, kadm.Offsets{"dr": {0: {Topic: "dr", Partition: 0, At: 4, LeaderEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records before 4: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if got := startOffset(t, adm, "dr"); got != 4 {
		t.Fatalf("earliest offset %d, want 4", got)
	}

	cases := []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		code      int16
		low       int64
	}{
		{"below the start changes nothing", "dr", 0, 2, 0, 4},
		{"above the high watermark", "dr", 0, 11, kerr.OffsetOutOfRange.Code, -1},
		{"negative other than -1", "dr", 0, -2, kerr.OffsetOutOfRange.Code, -1},
		{"unknown topic", "nope", 0, 1, kerr.UnknownTopicOrPartition.Code, -1},
		{"unknown partition", "dr", 3, 1, kerr.UnknownTopicOrPartition.Code, -1},
		{"inside the log", "dr", 0, 6, 0, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := deleteRecordsDirect(t, b, cl, tc.topic, tc.partition, tc.offset)
			if sp.ErrorCode != tc.code || sp.LowWatermark != tc.low {
				t.Fatalf("error %d low watermark %d, want %d %d", sp.ErrorCode, sp.LowWatermark, tc.code, tc.low)
			}
		})
	}

	// Consuming from below the start is out of range; from the start works.
	fetch, err := fetchReq(b, "dr", 2, 0, 0, 1<<20, 1<<20).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := fetch.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 6 {
		t.Fatalf("fetch below the start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
	consumeFrom := func(b *Broker, at int64) []string {
		t.Helper()
		c := testClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().At(at)}}))
		var got []string
		for len(got) < 4 {
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("consume from %d: %v", at, err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}
	if got := consumeFrom(b, 6); fmt.Sprint(got) != "[r6 r7 r8 r9]" {
		t.Fatalf("consumed %v from the new start", got)
	}

	// Survives a restart on the same data directory.
	stop()
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	adm2 := kadm.NewClient(cl2)
	if got := startOffset(t, adm2, "dr"); got != 6 {
		t.Fatalf("earliest offset after restart %d, want 6", got)
	}
	if got := consumeFrom(b2, 6); fmt.Sprint(got) != "[r6 r7 r8 r9]" {
		t.Fatalf("consumed %v after restart", got)
	}
	// -1 deletes everything up to the high watermark.
	if sp := deleteRecordsDirect(t, b2, cl2, "dr", 0, -1); sp.ErrorCode != 0 || sp.LowWatermark != 10 {
		t.Fatalf("delete records before -1: error %d, low watermark %d", sp.ErrorCode, sp.LowWatermark)
	}
	if got := startOffset(t, adm2, "dr"); got != 10 {
		t.Fatalf("earliest offset %d after deleting everything", got)
	}
}
