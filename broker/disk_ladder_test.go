package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
)

// TestDiskLadderOnBroker steps a real broker's disk-watermark ladder
// (80,90,95 % with a 1 % reserve) through each level and back with an
// injected disk-usage reader, and checks over the wire what each level
// refuses: level 1 new topics and partitions (POLICY_VIOLATION naming the
// first watermark), level 2 only signals (Ladder().Level()), level 3
// publishes of a tenant over quota (retriable KAFKA_STORAGE_ERROR), the
// reserve every publish. Each step is logged once on entry and on exit and
// exported as sluice_disk_watermark_level.
func TestDiskLadderOnBroker(t *testing.T) {
	const total = int64(1_000_000_000)
	var used atomic.Int64
	used.Store(total / 2)
	cfg := testBrokerConfig(t)
	cfg.DiskWatermarks = node.Watermarks{80, 90, 95}
	cfg.DiskMinFreeBytes = total / 100
	cfg.DiskUsage = func(string) (int64, int64, error) { return total, total - used.Load(), nil }
	b, logs := startBrokerLogLines(t, cfg)
	var over atomic.Bool
	b.SetOverQuota(func(string) bool { return over.Load() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := testClient(t, b, kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(30*time.Second))
	createTopic(t, cl, "t", 1, nil)
	produce := func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
	}
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	base := httpBase(b)
	setUsed := func(pct float64, level int) {
		t.Helper()
		used.Store(int64(pct / 100 * float64(total)))
		eventuallyTrue(t, fmt.Sprintf("level %d at %g%%", level, pct), func() (bool, string) {
			return b.Ladder().Level() == level, fmt.Sprintf("level %d", b.Ladder().Level())
		})
		if m := fmt.Sprintf("sluice_disk_watermark_level %d\n", level); !strings.Contains(scrape(t, base), m) {
			t.Fatalf("metrics lack %q", m)
		}
	}

	setUsed(85, 1)
	_, st := createTopicsResp(t, cl, "u", 1)
	wantRefused(t, "topic at level 1", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation, "disk above the first watermark")
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "t", 2
	cp.Topics = append(cp.Topics, cpt)
	cpr, err := cp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "partitions at level 1", cpr.Topics[0].ErrorCode, cpr.Topics[0].ErrorMessage, kerr.PolicyViolation, "disk above the first watermark")
	if err := produce(); err != nil {
		t.Fatalf("produce at level 1: %v", err)
	}

	setUsed(92, 2)
	if err := produce(); err != nil {
		t.Fatalf("produce at level 2: %v", err)
	}

	setUsed(96, 3)
	if err := produce(); err != nil {
		t.Fatalf("produce at level 3 of a tenant within its quota: %v", err)
	}
	over.Store(true)
	if err := produce(); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce at level 3 of a tenant over quota: %v, want KAFKA_STORAGE_ERROR", err)
	}
	over.Store(false)

	// Into the reserve: every publish is refused.
	used.Store(total - total/200)
	eventuallyTrue(t, "produce refused in the reserve", func() (bool, string) {
		err := produce()
		return errors.Is(err, kerr.KafkaStorageError), fmt.Sprint(err)
	})

	// Down: the hysteresis holds a level 2 points below its watermark.
	setUsed(94, 3)
	eventuallyTrue(t, "produce accepted out of the reserve", func() (bool, string) {
		err := produce()
		return err == nil, fmt.Sprint(err)
	})
	setUsed(92.9, 2)
	setUsed(87.9, 1)
	setUsed(50, 0)
	createTopic(t, cl, "u", 1, nil)

	for l := 1; l <= 3; l++ {
		if n := logs.count(t, "warn", fmt.Sprintf("disk above watermark %d:", l)); n != 1 {
			t.Errorf("entering level %d logged %d times, want once", l, n)
		}
		if n := logs.count(t, "info", fmt.Sprintf("disk below watermark %d again", l)); n != 1 {
			t.Errorf("leaving level %d logged %d times, want once", l, n)
		}
	}
}
