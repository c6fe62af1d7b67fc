package quota_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

func TestTableDefaultsAndReplace(t *testing.T) {
	tb := quota.NewTable()
	if l := tb.Limits("acme"); l != nil {
		t.Fatalf("a new table limits acme: %v", l)
	}
	if w, c := tb.Scheduling("acme"); w != 1 || c != quota.ClassStandard {
		t.Fatalf("Scheduling of an unknown tenant = %v, %q", w, c)
	}
	// Readers never block or see a torn entry while the table changes.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l := tb.Limits("acme")
				if v, ok := l.Get(quota.Topics); ok && (v < 1 || v > 100) {
					t.Errorf("read topics = %v, never published", v)
				}
				if w, c := tb.Scheduling("acme"); w != 1 && c != quota.ClassLow {
					t.Errorf("read weight %v with class %q, never published", w, c)
				}
			}
		}()
	}
	for i := 1; i <= 100; i++ {
		tb.Replace(int64(i), map[string]quota.Entry{"acme": {Limits: quota.Limits{quota.Topics: float64(i)}, Weight: float64(i), Class: quota.ClassLow}})
	}
	close(stop)
	wg.Wait()
	if w, c := tb.Scheduling("acme"); w != 100 || c != quota.ClassLow || tb.Revision() != 100 {
		t.Fatalf("after the last Replace: %v, %q, revision %d", w, c, tb.Revision())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestFollowAppliesWithinASecond: a SetQuotas made in etcd is what the
// followed Table answers within a second (the bound), and so are a
// scheduling change and a tenant's deletion.
func TestFollowAppliesWithinASecond(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := meta.Open(ctx, meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeAddr(t), ListenPeer: freeAddr(t), StartTimeout: 30 * time.Second}, zerolog.Nop())
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
	f, err := quota.Follow(ctx, st, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tb := f.Table()
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

	f.Close()
	f.Close() // harmless
}
