package largeobj

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
)

// TestStoredBytesAccounting: what each session state counts towards its
// tenant's stored large-object bytes (quota.go): an open session its
// declared size, a completed and a published object theirs, an aborted
// or expired one nothing; another tenant's sessions count for it alone.
// Begin is refused (wrapping node.ErrStorageQuota, naming the key, counted
// as a rejection) when the size does not fit object_storage_bytes, or
// storage_bytes with the logs' bytes.
func TestStoredBytesAccounting(t *testing.T) {
	f := newFixture(t)
	limits := quota.Static{"acme": {quota.ObjectStorageBytes: 100}}
	logs := map[string]int64{}
	var rejected []string
	f.svc.cfg.Quotas = Quotas{Limits: limits.Limits, LogBytes: func(tn string) int64 { return logs[tn] },
		Rejected: func(tn, reason string) { rejected = append(rejected, tn+"/"+reason) }}
	stored := func() map[string]int64 {
		t.Helper()
		m, err := f.svc.StoredByTenant(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := func(what string, acme, globex int64) {
		t.Helper()
		if m := stored(); m["acme"] != acme || m["globex"] != globex {
			t.Fatalf("%s: stored %v, want acme %d, globex %d", what, m, acme, globex)
		}
	}
	body, sum := payload(1, 30)
	open := f.begin(t, "acme", body, sum)
	want("one open session", 30, 0)

	done := f.begin(t, "acme", body, sum)
	mustPut(t, f, f.svc, done.ID, body, 0, 30)
	if _, err := f.svc.Complete(t.Context(), "acme", done.ID); err != nil {
		t.Fatal(err)
	}
	pub := f.begin(t, "acme", body, sum)
	mustPut(t, f, f.svc, pub.ID, body, 0, 30)
	if _, err := f.svc.Complete(t.Context(), "acme", pub.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Claim(t.Context(), "acme", ref.Ref{ID: pub.ID, Size: 30, SHA256: sum}, site); err != nil {
		t.Fatal(err)
	}
	f.begin(t, "globex", body, sum)
	want("open, completed and published", 90, 30)

	// 90 + 30 > 100: refused, naming the key; 10 more fit.
	_, err := f.svc.Begin(t.Context(), BeginRequest{Tenant: "acme", Topic: "orders", Size: 30, SHA256: sum})
	if !errors.Is(err, node.ErrStorageQuota) || !strings.Contains(err.Error(), quota.ObjectStorageBytes) {
		t.Fatalf("begin beyond object_storage_bytes: %v", err)
	}
	small, ssum := payload(2, 10)
	fits := f.begin(t, "acme", small, ssum)
	if err := f.svc.Abort(t.Context(), "acme", fits.ID); err != nil {
		t.Fatal(err)
	}

	// Aborted sessions count nothing; the completed one expires unpublished
	// at its TTL; the open one is aborted at its TTL. The published object
	// stays until the ledger releases it.
	if err := f.svc.Abort(t.Context(), "acme", open.ID); err != nil {
		t.Fatal(err)
	}
	want("one aborted", 60, 30)
	f.clk.Advance(2 * time.Hour)
	if _, err := f.svc.Sweep(t.Context(), f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	want("after the TTL", 30, 0)

	// storage_bytes adds the logs' bytes.
	limits["acme"] = quota.Limits{quota.StorageBytes: 100}
	logs["acme"] = 50
	_, err = f.svc.Begin(t.Context(), BeginRequest{Tenant: "acme", Topic: "orders", Size: 30, SHA256: sum})
	if !errors.Is(err, node.ErrStorageQuota) || !strings.Contains(err.Error(), "quota "+quota.StorageBytes+" ") {
		t.Fatalf("begin beyond storage_bytes with the logs: %v", err)
	}
	f.begin(t, "acme", small, ssum) // 50 + 30 + 10 ≤ 100
	if got := strings.Join(rejected, ","); got != "acme/object_storage_bytes,acme/storage_bytes" {
		t.Fatalf("rejections counted %q", got)
	}
}

// TestQuotaBeforeTheFirstRecount: session records that predate the byte
// counters (a cluster whose layout was written by an earlier version) are
// summed by the checks and the storage loop until Run's recount at start,
// after which the counters answer the same figures.
func TestQuotaBeforeTheFirstRecount(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	limits := quota.Static{"acme": {quota.ObjectStorageBytes: 100}}
	f.svc.cfg.Quotas = Quotas{Limits: limits.Limits}
	body, sum := payload(4, 40)
	done := f.begin(t, "acme", body, sum)
	mustPut(t, f, f.svc, done.ID, body, 0, 40)
	if _, err := f.svc.Complete(ctx, "acme", done.ID); err != nil {
		t.Fatal(err)
	}
	f.begin(t, "acme", body, sum)
	// As if written before the counters: no counter, no mark.
	if _, err := f.st.Client().Delete(ctx, f.st.Prefix()+"upload-bytes", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ListUploadBytes(ctx); !errors.Is(err, meta.ErrUncounted) {
		t.Fatalf("ListUploadBytes without the mark: %v", err)
	}
	want := func(what string) {
		t.Helper()
		m, err := f.svc.StoredByTenant(ctx)
		if err != nil || m["acme"] != 80 || len(m) != 1 {
			t.Fatalf("%s: stored %v, %v; want acme 80", what, m, err)
		}
		_, err = f.svc.Begin(ctx, BeginRequest{Tenant: "acme", Topic: "orders", Size: 21, SHA256: sum})
		if !errors.Is(err, node.ErrStorageQuota) {
			t.Fatalf("%s: begin of 21 bytes beside 80: %v", what, err)
		}
	}
	want("summed from the records")

	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); f.svc.Run(runCtx, time.Hour) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.st.ListUploadBytes(ctx); err == nil {
			break
		} else if !errors.Is(err, meta.ErrUncounted) || time.Now().After(deadline) {
			t.Fatalf("the counters after Run started: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	c, err := f.st.UploadBytesOf(ctx, "acme")
	if err != nil || c.Open != 40 || c.Stored != 40 {
		t.Fatalf("acme's counter after the recount: %+v, %v; want 40 open, 40 stored", c, err)
	}
	want("from the counters")
}
