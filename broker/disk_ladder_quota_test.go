package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// TestDiskLadderActsThroughQuotas: the ladder's second step takes the burst
// allowance from a tenant of the low priority class (a publish its burst
// window absorbed below it is now held), and its third refuses the
// publishes of a tenant whose produce meter is in debt, with the retriable
// KAFKA_STORAGE_ERROR — the broker's own wiring of the ladder to the
// meters, with the quota and class set in etcd.
func TestDiskLadderActsThroughQuotas(t *testing.T) {
	const total = int64(1_000_000_000)
	var used atomic.Int64
	used.Store(total / 2)
	cfg := testBrokerConfig(t)
	cfg.DiskWatermarks = node.Watermarks{80, 90, 95}
	cfg.DiskMinFreeBytes = total / 100
	cfg.DiskUsage = func(string) (int64, int64, error) { return total, total - used.Load(), nil }
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	const rate = 2000 // bytes/s: a 600-byte record fits the 1 s burst twice, not 10 ms of it
	if _, err := b.Store.SetQuotas(ctx, meta.DefaultTenant, map[string]float64{quota.ProducerByteRate: rate}, nil, quota.Check); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.SetTenantScheduling(ctx, meta.DefaultTenant, 0, quota.ClassLow); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the quota and class followed", func() (bool, string) {
		_, class := b.Quotas().Scheduling(meta.DefaultTenant)
		l := b.Quotas().Limits(meta.DefaultTenant)
		return class == quota.ClassLow && l[quota.ProducerByteRate] == rate, fmt.Sprint(class, l)
	})
	cl := testClient(t, b, kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(20*time.Second), kgo.ProducerLinger(0))
	createTopic(t, cl, "t", 1, nil)
	value := make([]byte, 600) // two fit the 1 s burst, with room: the second step alone can hold one
	produce := func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: value}).FirstErr()
	}
	base := httpBase(b)
	throttled := func() float64 {
		m := regexp.MustCompile(`sluice_tenant_throttle_seconds_total\{reason="producer_byte_rate",tenant="default"\} ([0-9.e+-]+)`).
			FindStringSubmatch(scrape(t, base))
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	setLevel := func(pct float64, level int) {
		t.Helper()
		used.Store(int64(pct / 100 * float64(total)))
		eventuallyTrue(t, fmt.Sprintf("level %d", level), func() (bool, string) {
			return b.DiskLevel() == level, fmt.Sprint(b.DiskLevel())
		})
	}

	// Below the ladder: one record is inside the burst, nobody is held.
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	if v := throttled(); v != 0 {
		t.Fatalf("held %vs below the ladder inside the burst", v)
	}
	// Second step: the low-priority tenant is held to its base rate. Its
	// bucket still holds about half its 1 s burst, but the lowered window
	// caps what it may save at 10 ms worth: one record now puts it in debt.
	// (Without the second step the same record would fit what it saved.)
	setLevel(92, 2)
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	if v := throttled(); v <= 0 {
		t.Fatalf("a low-priority tenant at the second step was not held (throttle %v)", v)
	}

	// Third step: in debt now, so over its quota: refused, retriably.
	setLevel(96, 3)
	if err := produce(); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce at the third step while in debt: %v, want KAFKA_STORAGE_ERROR", err)
	}
	// The disk drains: writes resume.
	setLevel(50, 0)
	eventuallyTrue(t, "produce resumes once the disk drained", func() (bool, string) {
		err := produce()
		return err == nil, fmt.Sprint(err)
	})
}
