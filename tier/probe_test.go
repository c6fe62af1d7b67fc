package tier_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// getsOther answers every Get with bytes that were not written.
type getsOther struct{ objstore.Store }

func (getsOther) Get(context.Context, string, int64, int64) ([]byte, error) {
	return []byte("other"), nil
}

func TestProbe(t *testing.T) {
	ctx := t.Context()
	key := tier.ProbeKey(3)
	if _, ok := tier.ParseKey(key); ok || !strings.HasPrefix(key, tier.ProbePrefix) {
		t.Fatalf("probe key %q must lie under %q and not parse as a partition's key", key, tier.ProbePrefix)
	}

	inner := mem.New()
	if err := inner.Put(ctx, "0000/other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tier.Probe(ctx, inner, key); err != nil {
		t.Fatalf("probe of a working store: %v", err)
	}
	if _, err := inner.Head(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the probe object is left behind: head %v", err)
	}
	if err := tier.CheckListable(ctx, inner); err != nil {
		t.Fatalf("listing a working store: %v", err)
	}

	for _, tc := range []struct {
		name string
		op   fault.Op
		says string
	}{
		{"put fails", fault.OpPut, "write a probe object"},
		{"get fails", fault.OpGet, "read the probe object back"},
		{"list fails", fault.OpList, "list the probe object"},
		{"delete fails", fault.OpDelete, "delete the probe object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fault.New(mem.New(), fault.Config{Seed: 1})
			f.Set(tc.op, fault.Faults{ServerErrorRate: 1})
			if err := tier.Probe(ctx, f, key); err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "InternalError") {
				t.Fatalf("probe = %v, want an error saying %q with the store's cause", err, tc.says)
			}
		})
	}
	t.Run("read back differs", func(t *testing.T) {
		if err := tier.Probe(ctx, getsOther{mem.New()}, key); err == nil || !strings.Contains(err.Error(), "differ") {
			t.Fatalf("probe = %v, want a mismatch", err)
		}
	})
	t.Run("listing fails", func(t *testing.T) {
		f := fault.New(mem.New(), fault.Config{Seed: 1})
		f.SetDown(true)
		if err := tier.CheckListable(ctx, f); err == nil || !strings.Contains(err.Error(), "list") {
			t.Fatalf("CheckListable of a store that is down = %v", err)
		}
	})
}
