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
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/tier/objstore"
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
	p, _ := b.partitionOf(topic, 0)
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
			r := b.remoteRange(context.Background(), p)
			return r.RemoteEnd == hw, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
		})
		objs, _, err := b.tiers.Objects(context.Background(), p.TopicID(), 0)
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
		_, err := b.objects.Head(context.Background(), key)
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
	if _, err := b.readRemote(context.Background(), p, wal.Offset(dayStart[5]), 1<<20); !errors.Is(err, wal.ErrOffsetOutOfRange) {
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
	resp, err := adm.DeleteRecords(context.Background(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: to}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != to {
		t.Fatalf("DeleteRecords to %d: %+v", to, r)
	}
	if e := earliest(); e != to {
		t.Fatalf("earliest after DeleteRecords: %d, want %d", e, to)
	}
	if code := fetchRaw(t, b, cl, topic, dayStart[15]).ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the DeleteRecords start: code %d, want OFFSET_OUT_OF_RANGE", code)
	}
}
