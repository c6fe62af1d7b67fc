package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"
)

// knownKeys stands in for quota.Check (this package may not import it):
// two keys, one of which refuses 0.
func knownKeys(key string, v float64) error {
	switch key {
	case "producer_byte_rate":
		if v == 0 {
			return errors.New("0 would refuse everything")
		}
		return nil
	case "topics":
		return nil
	}
	return fmt.Errorf("unknown quota key %q", key)
}

func TestQuotaStore(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")

	q, err := s.GetQuotas(ctx, "acme")
	if err != nil || !q.IsDefault() || q.Tenant != "acme" || q.Limits == nil {
		t.Fatalf("GetQuotas of a tenant without a record = %+v, %v; want the defaults", q, err)
	}
	_, err = s.GetQuotas(ctx, "ghost")
	wantErr(t, "GetQuotas(ghost)", err, ErrNotFound)
	_, err = s.SetQuotas(ctx, "ghost", map[string]float64{"topics": 1}, nil, knownKeys)
	wantErr(t, "SetQuotas(ghost)", err, ErrNotFound)

	q, err = s.SetQuotas(ctx, "acme", map[string]float64{"producer_byte_rate": 1e7, "topics": 10}, nil, knownKeys)
	if err != nil || !maps.Equal(q.Limits, map[string]float64{"producer_byte_rate": 1e7, "topics": 10}) {
		t.Fatalf("SetQuotas = %+v, %v", q, err)
	}
	q, err = s.SetQuotas(ctx, "acme", map[string]float64{"topics": 0}, []string{"producer_byte_rate", "never_set"}, knownKeys)
	if err != nil || !maps.Equal(q.Limits, map[string]float64{"topics": 0}) {
		t.Fatalf("SetQuotas removing one key = %+v, %v", q, err)
	}
	if got, err := s.GetQuotas(ctx, "acme"); err != nil || !maps.Equal(got.Limits, q.Limits) {
		t.Fatalf("GetQuotas = %+v, %v; want %+v", got, err, q)
	}

	for _, bad := range []struct {
		set    map[string]float64
		remove []string
		why    string
	}{
		{map[string]float64{"producer_bytes_rate": 1}, nil, "unknown quota key"},
		{map[string]float64{"producer_byte_rate": 0}, nil, "0 would refuse"},
		{map[string]float64{"topics": -1}, nil, "finite number >= 0"},
		{map[string]float64{"Topics": 1}, nil, "contains"},
		{map[string]float64{"topics": 1}, []string{"topics"}, "both set and removed"},
		{nil, []string{""}, "1 to 64 characters"},
	} {
		_, err := s.SetQuotas(ctx, "acme", bad.set, bad.remove, knownKeys)
		if !errors.Is(err, ErrInvalidQuota) || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("SetQuotas(%v, %v) = %v, want ErrInvalidQuota saying %q", bad.set, bad.remove, err, bad.why)
		}
	}

	// Scheduling attributes: 0 and "" leave an attribute as it is.
	q, err = s.SetTenantScheduling(ctx, "acme", 2.5, "")
	if err != nil || q.Weight != 2.5 || q.PriorityClass != PriorityStandard {
		t.Fatalf("SetTenantScheduling(2.5) = %+v, %v", q, err)
	}
	q, err = s.SetTenantScheduling(ctx, "acme", 0, PriorityLow)
	if err != nil || q.Weight != 2.5 || q.PriorityClass != PriorityLow || q.Limits["topics"] != 0 {
		t.Fatalf("SetTenantScheduling(low) = %+v, %v", q, err)
	}
	for _, bad := range []struct {
		w     float64
		class string
	}{{-1, ""}, {2e6, ""}, {0, "gold"}} {
		_, err := s.SetTenantScheduling(ctx, "acme", bad.w, bad.class)
		wantErr(t, fmt.Sprintf("SetTenantScheduling(%v, %q)", bad.w, bad.class), err, ErrInvalidQuota)
	}

	// Back to the defaults: the record goes.
	if _, err := s.SetQuotas(ctx, "acme", nil, []string{"topics"}, knownKeys); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetTenantScheduling(ctx, "acme", 1, PriorityStandard); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Client().Get(ctx, s.quotaKey("acme")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a record of defaults is still stored: %v, %v", resp, err)
	}

	// ListQuotas, and deleting a tenant deletes its record.
	mustCreateTenant(t, s, "beta")
	for _, tn := range []string{"beta", "acme"} {
		if _, err := s.SetQuotas(ctx, tn, map[string]float64{"topics": 3}, nil, knownKeys); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListQuotas(ctx)
	if err != nil || len(all) != 2 || all[0].Tenant != "acme" || all[1].Tenant != "beta" {
		t.Fatalf("ListQuotas = %+v, %v", all, err)
	}
	if err := s.DeleteTenant(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Client().Get(ctx, s.quotaKey("beta")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the quota record outlived its tenant: %v, %v", resp, err)
	}
	mustCreateTenant(t, s, "beta")
	if q, err := s.GetQuotas(ctx, "beta"); err != nil || !q.IsDefault() {
		t.Fatalf("a tenant created again under the name inherited quotas: %+v, %v", q, err)
	}
}

// TestSetQuotasConcurrent: writers of different keys of one tenant at once
// lose none of each other's keys (each write is conditioned on the record's
// revision and retried).
func TestSetQuotasConcurrent(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	const writers = 6
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.SetQuotas(ctx, "acme", map[string]float64{fmt.Sprintf("key_%d", i): float64(i + 1)}, nil, nil)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// A writer that lost maxSecurityAttempts times says so; with six
		// writers each loses at most five times.
		if err != nil {
			t.Errorf("SetQuotas: %v", err)
		}
	}
	q, err := s.GetQuotas(ctx, "acme")
	if err != nil || len(q.Limits) != writers {
		t.Fatalf("after %d concurrent writers: %+v, %v; want every key", writers, q.Limits, err)
	}
}

// TestSetQuotasRacingDeleteTenant: a write that read the tenant before it
// was deleted does not bring a record back after the deletion.
func TestSetQuotasRacingDeleteTenant(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	_, err := s.updateQuotas(ctx, "acme", "set quotas", nil, func(q *TenantQuotas) error {
		q.Limits["topics"] = 1
		// Between the read and the write, the tenant goes (and comes back:
		// a new incarnation must not inherit the old one's write either).
		if err := s.DeleteTenant(ctx, "acme"); err != nil {
			return err
		}
		_, err := s.CreateTenant(ctx, "acme")
		return err
	})
	// The retry reads the new tenant and deletes it and recreates it again,
	// so the loop ends in ErrConflict; what matters is that no attempt wrote.
	wantErr(t, "updateQuotas racing DeleteTenant", err, ErrConflict)
	if resp, err := s.Client().Get(ctx, s.quotaKey("acme")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a record was written for a deleted tenant: %v, %v", resp.Kvs, err)
	}
}

func TestDecodeQuotas(t *testing.T) {
	s := &Store{prefix: "/p/"}
	for _, c := range []struct {
		key, val string
		want     error
	}{
		{"/p/quotas/acme", `{"v":1,"tenant":"acme","limits":{"producer_byte_rate":1e7},"weight":1,"priority_class":"standard"}`, nil},
		{"/p/quotas/acme", `{"v":1,"tenant":"acme","limits":{"from_a_newer_build":3},"weight":0.5,"priority_class":"low"}`, nil},
		{"/p/quotas/beta", `{"v":1,"tenant":"acme","weight":1,"priority_class":"standard"}`, ErrCorrupt},
		{"/p/quotas/acme", `{"v":2,"tenant":"acme","weight":1,"priority_class":"standard"}`, ErrUnknownVersion},
		{"/p/quotas/acme", `{"v":0,"tenant":"acme","weight":1,"priority_class":"standard"}`, ErrCorrupt},
		{"/p/quotas/acme", `{"v":1,"tenant":"acme","weight":0,"priority_class":"standard"}`, ErrCorrupt},
		{"/p/quotas/acme", `{"v":1,"tenant":"acme","weight":1,"priority_class":"gold"}`, ErrCorrupt},
		{"/p/quotas/acme", `{"v":1,"tenant":"acme","limits":{"topics":-1},"weight":1,"priority_class":"standard"}`, ErrCorrupt},
		{"/p/quotas/acme", `{`, ErrCorrupt},
	} {
		_, err := s.decodeQuotas(c.key, []byte(c.val))
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("decode %s %s = %v, want %v", c.key, c.val, err, c.want)
		}
	}
}

// FuzzDecodeQuotas: a record read from etcd never panics the decoder, and
// one that decodes encodes to a record that decodes the same.
func FuzzDecodeQuotas(f *testing.F) {
	f.Add(`{"v":1,"tenant":"acme","limits":{"producer_byte_rate":1e7,"topics":3},"weight":1,"priority_class":"standard"}`)
	f.Add(`{"v":1,"tenant":"acme","weight":1e6,"priority_class":"low"}`)
	f.Add(`{"v":1,"tenant":"acme","limits":{"a":1e308},"weight":1e-300,"priority_class":"low"}`)
	s := &Store{prefix: "/p/"}
	f.Fuzz(func(t *testing.T, val string) {
		q, err := s.decodeQuotas("/p/quotas/acme", []byte(val))
		if err != nil {
			return
		}
		enc, err := s.encodeQuotas(q)
		if err != nil {
			t.Fatalf("encode %+v: %v", q, err)
		}
		again, err := s.decodeQuotas("/p/quotas/acme", []byte(enc))
		if err != nil || again.Weight != q.Weight || again.PriorityClass != q.PriorityClass || !maps.Equal(again.Limits, q.Limits) {
			t.Fatalf("%s decoded as %+v, re-encoded as %s, decoded again as %+v, %v", val, q, enc, again, err)
		}
	})
}

func waitQuotaSnapshot(t *testing.T, v *QuotaView, what string, cond func(QuotaSnapshot) bool) QuotaSnapshot {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		ch := v.Changed()
		if snap := v.Snapshot(); cond(snap) {
			return snap
		}
		select {
		case <-ch:
		case <-v.Done():
			t.Fatalf("view stopped while waiting for %s", what)
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; snapshot %+v", testTimeout, what, v.Snapshot())
		}
	}
}

// TestWatchQuotas: the view starts from the stored records, follows a set,
// a tenant's deletion and a corrupt record, and stops with its ctx.
func TestWatchQuotas(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	mustCreateTenant(t, s, "beta")
	if _, err := s.SetQuotas(ctx, "acme", map[string]float64{"topics": 2}, nil, nil); err != nil {
		t.Fatal(err)
	}
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := s.WatchQuotas(vctx)
	if err != nil {
		t.Fatal(err)
	}
	first := v.Snapshot()
	if first.Tenants["acme"].Limits["topics"] != 2 || first.Revision == 0 {
		t.Fatalf("first snapshot %+v", first)
	}
	if _, err := s.SetTenantScheduling(ctx, "beta", 3, PriorityLow); err != nil {
		t.Fatal(err)
	}
	waitQuotaSnapshot(t, v, "beta's weight", func(s QuotaSnapshot) bool { return s.Tenants["beta"].Weight == 3 })
	if _, ok := first.Tenants["beta"]; ok {
		t.Fatal("an earlier snapshot changed")
	}
	if err := s.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	waitQuotaSnapshot(t, v, "acme gone", func(s QuotaSnapshot) bool { _, ok := s.Tenants["acme"]; return !ok })

	bad := s.quotaKey("gamma")
	if _, err := s.Client().Put(ctx, bad, `{"v":9}`); err != nil {
		t.Fatal(err)
	}
	waitQuotaSnapshot(t, v, "the corrupt key", func(s QuotaSnapshot) bool { return len(s.Corrupt) == 1 && s.Corrupt[0] == bad })
	if _, err := s.Client().Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitQuotaSnapshot(t, v, "the corrupt key gone", func(s QuotaSnapshot) bool { return len(s.Corrupt) == 0 })
	cancel()
	recvWithin(t, v.Done(), "the view to stop with its ctx")
}
