package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/wal"
)

func TestGroupAdminWithKadm(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	ctx := context.Background()
	const topic, groupID = "events", "reporting"
	producer := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, producer, topic, 3, nil)
	adm := kadm.NewClient(producer)

	// 10 records per partition, the second half an hour later than the first.
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	var rs []*kgo.Record
	for i := range 30 {
		ts := base
		if i%10 >= 5 {
			ts = base.Add(time.Hour)
		}
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i / 10), Timestamp: ts, Value: []byte(fmt.Sprint(i))})
	}
	if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A consumer reads everything, commits and stays in the group.
	consumer := testClient(t, b, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 30 {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		fs := consumer.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("consumed %d of 30 records", got)
		}
		got += len(fs.Records())
		if err := consumer.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatal(err)
		}
	}

	described, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[groupID]; d.State != "Stable" || len(d.Members) != 1 || d.ProtocolType != "consumer" || d.Protocol == "" {
		t.Fatalf("described %+v", d)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed[groupID]; !ok || l.State != "Stable" || l.ProtocolType != "consumer" {
		t.Fatalf("listed %+v", listed)
	}
	if l, _ := adm.ListGroups(ctx, "Empty"); len(l) != 0 {
		t.Fatalf("state filter Empty listed %v", l.Groups())
	}

	// While the consumer is a member, resets and deletes are refused.
	zero := kadm.Offsets{}
	for p := range int32(3) {
		zero.AddOffset(topic, p, 0, -1)
	}
	resp, err := adm.CommitOffsets(ctx, groupID, zero)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("reset of an active group: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := b.coord.ResetOffsets(ctx, groupID, map[string]map[int32]int64{topic: {0: 0}}); !errors.Is(err, group.ErrNotEmpty) {
		t.Fatalf("ResetOffsets of an active group: %v", err)
	}
	dr, err := adm.DeleteGroups(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if err := dr[groupID].Err; !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of an active group: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, _ := fetched.Lookup(topic, p); o.At != 10 {
			t.Fatalf("committed offset of %d: %d, want 10", p, o.At)
		}
	}

	consumer.Close() // leaves the group: now Empty
	brokertest.Eventually(t, 10*time.Second, "the group to be Empty", func() bool {
		d, err := adm.DescribeGroups(ctx, groupID)
		return err == nil && d[groupID].State == "Empty"
	})

	// Reset to the first record at or after base+1h: offset 5 everywhere.
	listedOffsets, err := adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, groupID, listedOffsets.Offsets()); err != nil {
		t.Fatalf("reset to a timestamp: %v", err)
	}
	wantOffsets(t, adm, groupID, topic, map[int32]int64{0: 5, 1: 5, 2: 5})
	if err := adm.CommitAllOffsets(ctx, groupID, zero); err != nil {
		t.Fatalf("reset to the start: %v", err)
	}
	wantOffsets(t, adm, groupID, topic, map[int32]int64{0: 0, 1: 0, 2: 0})

	// The Go API used by HTTP: bounds are the log start and the high watermark.
	resetTests := []struct {
		name string
		to   int64
		want error
	}{
		{"to the high watermark", 10, nil},
		{"above the high watermark", 11, wal.ErrOffsetOutOfRange},
		{"below the log start", -1, wal.ErrOffsetOutOfRange},
	}
	for _, tc := range resetTests {
		t.Run(tc.name, func(t *testing.T) {
			err := b.coord.ResetOffsets(ctx, groupID, map[string]map[int32]int64{topic: {1: tc.to}})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("ResetOffsets to %d: %v, want %v", tc.to, err, tc.want)
			}
		})
	}
	wantOffsets(t, adm, groupID, topic, map[int32]int64{0: 0, 1: 10, 2: 0})

	// OffsetDelete, then DeleteGroups of the empty group.
	if _, err := adm.DeleteOffsets(ctx, groupID, kadm.TopicsSet{topic: {2: {}}}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, adm, groupID, topic, map[int32]int64{0: 0, 1: 10})
	if dr, err := adm.DeleteGroups(ctx, groupID); err != nil || dr[groupID].Err != nil {
		t.Fatalf("delete an empty group: %v %v", err, dr[groupID].Err)
	}
	if l, _ := adm.ListGroups(ctx); len(l) != 0 {
		t.Fatalf("listed after delete: %v", l.Groups())
	}
	wantOffsets(t, adm, groupID, topic, map[int32]int64{})
	if dr, _ := adm.DeleteGroups(ctx, groupID); !errors.Is(dr[groupID].Err, kerr.GroupIDNotFound) {
		t.Fatalf("second delete: %v", dr[groupID].Err)
	}
}

func wantOffsets(t *testing.T, adm *kadm.Client, groupID, topic string, want map[int32]int64) {
	t.Helper()
	fetched, err := adm.FetchOffsets(context.Background(), groupID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	fetched.Each(func(o kadm.OffsetResponse) {
		n++
		if w, ok := want[o.Partition]; !ok || o.Topic != topic || o.At != w {
			t.Errorf("committed %s-%d at %d; want %v", o.Topic, o.Partition, o.At, want)
		}
	})
	if n != len(want) {
		t.Fatalf("%d committed offsets, want %d", n, len(want))
	}
}

func TestGroupOffsetsExpireWhenEmpty(t *testing.T) {
	now := time.Unix(2_000_000_000, 0)
	var mu sync.Mutex // guards now, read by the coordinator's goroutines
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	ccfg := groupTestConfig()
	ccfg.OffsetsRetention = time.Hour
	ccfg.RetentionCheckInterval = time.Minute
	ccfg.Now = clock
	b, _ := startGroupBroker(t, testBrokerConfig(t), ccfg)
	ctx := context.Background()
	cl := testClient(t, b)
	createTopic(t, cl, "t", 1, nil)
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.AddOffset("t", 0, 0, -1)
	if err := adm.CommitAllOffsets(ctx, "idle", offs); err != nil {
		t.Fatal(err)
	}
	advance(59 * time.Minute)
	wantOffsets(t, adm, "idle", "t", map[int32]int64{0: 0})
	advance(2 * time.Minute)
	brokertest.Eventually(t, 10*time.Second, "expired offsets and group removed", func() bool {
		l, err := adm.ListGroups(ctx)
		return err == nil && len(l) == 0
	})
	wantOffsets(t, adm, "idle", "t", map[int32]int64{})
	if got, err := b.Store.GroupOffsets(ctx, "default", "idle"); err != nil || len(got) != 0 {
		t.Fatalf("etcd still holds %v (%v)", got, err)
	}
}
