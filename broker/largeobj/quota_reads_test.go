package largeobj

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// countingKV counts the upload records etcd answers to range reads under
// prefix: the etcd client's own seam (clientv3.Client.KV), under the real
// store.
type countingKV struct {
	clientv3.KV
	prefix  string
	records atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := c.KV.Get(ctx, key, opts...)
	if err == nil && strings.HasPrefix(key, c.prefix) {
		c.records.Add(int64(len(resp.Kvs)))
	}
	return resp, err
}

// TestQuotaChecksReadNoRecords (issue 20): with many session records of
// published objects in etcd, Begin's and Complete's quota checks and the
// storage loop's figures read no upload record beyond the session itself
// (they read the tenants' counters), and still count right: a Begin that
// does not fit is refused. Before the counters each of them listed every
// record.
func TestQuotaChecksReadNoRecords(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	const others = 40
	for i := range others {
		u := meta.Upload{ID: fmt.Sprintf("globex%02d", i), Tenant: "globex", Topic: "t", Size: 1000, SHA256: "ab",
			State: meta.UploadPublished, ObjectKey: ObjectKey("globex", fmt.Sprint(i)), UploadID: "u", PartSize: part}
		if _, err := f.st.CreateUpload(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	limits := quota.Static{"acme": {quota.ObjectStorageBytes: 100}}
	f.svc.cfg.Quotas = Quotas{Limits: limits.Limits}
	kv := &countingKV{KV: f.st.Client().KV, prefix: f.st.Prefix() + "uploads/"}
	f.st.Client().KV = kv
	read := func(what string, most int64, do func()) {
		t.Helper()
		before := kv.records.Load()
		do()
		if n := kv.records.Load() - before; n > most {
			t.Fatalf("%s read %d upload records; want at most %d", what, n, most)
		}
	}

	body, sum := payload(3, 30)
	var s Session
	read("Begin", 0, func() { s = f.begin(t, "acme", body, sum) })
	mustPut(t, f, f.svc, s.ID, body, 0, 30)
	read("Complete", 1, func() { // the session's own record
		if _, err := f.svc.Complete(ctx, "acme", s.ID); err != nil {
			t.Fatal(err)
		}
	})
	var stored map[string]int64
	read("StoredByTenant", 0, func() {
		var err error
		if stored, err = f.svc.StoredByTenant(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if stored["acme"] != 30 || stored["globex"] != others*1000 {
		t.Fatalf("stored %v, want acme 30, globex %d", stored, others*1000)
	}
	read("a refused Begin", 0, func() {
		_, err := f.svc.Begin(ctx, BeginRequest{Tenant: "acme", Topic: "orders", Size: 71, SHA256: sum})
		if !errors.Is(err, node.ErrStorageQuota) {
			t.Fatalf("begin beyond object_storage_bytes: %v", err)
		}
	})
}
