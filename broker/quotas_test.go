package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

func freeQuotaAddr(t *testing.T) string {
	t.Helper()
	return freeport.Must(t)
}

// TestFollowAppliesWithinASecond: a SetQuotas made in etcd is what the
// followed Table answers within a second (the bound), and so are a
// scheduling change and a tenant's deletion.
func TestFollowAppliesWithinASecond(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := meta.Open(ctx, meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeQuotaAddr(t), ListenPeer: freeQuotaAddr(t), StartTimeout: 30 * time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatalf("meta.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if _, err := st.CreateTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetQuotas(ctx, "acme", map[string]float64{quota.Topics: 5}, nil, quota.Check); err != nil {
		t.Fatal(err)
	}
	f, err := followQuotas(ctx, st, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	tb := f.table
	if v, _ := tb.Limits("acme").Get(quota.Topics); v != 5 {
		t.Fatalf("the first read gave topics = %v, want 5", v)
	}

	within := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		deadline := start.Add(time.Second)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s not applied within 1 s", what)
			}
			<-tick.C
		}
		t.Logf("%s applied in %v", what, time.Since(start))
	}
	if _, err := st.SetQuotas(ctx, "acme", map[string]float64{quota.ProducerByteRate: 1e7}, []string{quota.Topics}, quota.Check); err != nil {
		t.Fatal(err)
	}
	within("SetQuotas", func() bool {
		l := tb.Limits("acme")
		_, hasTopics := l.Get(quota.Topics)
		v, _ := l.Get(quota.ProducerByteRate)
		return v == 1e7 && !hasTopics
	})
	if _, err := st.SetTenantScheduling(ctx, "acme", 4, meta.PriorityLow); err != nil {
		t.Fatal(err)
	}
	within("SetTenantScheduling", func() bool { w, c := tb.Scheduling("acme"); return w == 4 && c == quota.ClassLow })
	if err := st.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	within("DeleteTenant", func() bool { return tb.Limits("acme") == nil })

	f.close()
	f.close() // harmless
}
