package node

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/quota"
)

// rejections is the node's sluice_tenant_rejections_total of tenant and
// reason.
func rejections(t *testing.T, b *Node, tenant, reason string) float64 {
	t.Helper()
	mfs, err := b.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_tenant_rejections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["tenant"] == tenant && l["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestDiskRefusalsCountedOnce: the disk ladder's first step refuses a new
// topic (disk_watermark), and a full disk refuses each batch (disk_reserve)
// once: the HTTP publish's check of the whole request (PrecheckAppend)
// neither refuses nor counts what the batches refuse.
func TestDiskRefusalsCountedOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quotas = quota.Static{"acme": {quota.StorageBytes: 1 << 30}}
	b := New(cfg, zerolog.Nop())

	b.level.Store(1)
	if err := b.checkCreate("acme~t", 1, 1); err == nil {
		t.Fatal("a topic created above the first watermark")
	}
	if n := rejections(t, b, "acme", quota.RejectDiskWatermark); n != 1 {
		t.Fatalf("disk_watermark rejections %v, want 1", n)
	}
	b.level.Store(0)

	why := "free bytes below the reserve"
	b.diskFull.Store(&why)
	if err := b.PrecheckAppend("acme~t"); err != nil {
		t.Fatalf("the request's check answered a full disk: %v", err)
	}
	for range 2 {
		if err := b.CheckAppend("acme~t"); err == nil {
			t.Fatal("a batch appended to a full disk")
		}
	}
	if n := rejections(t, b, "acme", quota.RejectDiskReserve); n != 2 {
		t.Fatalf("disk_reserve rejections %v after the request's check and two batches, want 2", n)
	}
}
