package meta

import (
	"errors"
	"testing"
	"time"
)

// TestUsageSumsBrokersAndGoesWithTheLease: two brokers' figures add up by
// tenant; a renewed lease is kept; a revoked lease takes its broker's
// figures with it.
func TestUsageSumsBrokersAndGoesWithTheLease(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	l1, err := s.UsageLease(ctx, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.UsageLease(ctx, l1, 10*time.Second); err != nil || again != l1 {
		t.Fatalf("renewal gave lease %x (%v), want %x", again, err, l1)
	}
	l2, err := s.UsageLease(ctx, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutUsage(ctx, 1, map[string]int64{"acme": 100, "globex": 5}, l1); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUsage(ctx, 2, map[string]int64{"acme": 20}, l2); err != nil {
		t.Fatal(err)
	}
	got, err := s.Usage(ctx)
	if err != nil || got["acme"] != 120 || got["globex"] != 5 {
		t.Fatalf("usage = %v, %v; want acme 120, globex 5", got, err)
	}
	if _, err := s.Client().Revoke(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Usage(ctx); got["acme"] != 100 {
		t.Fatalf("after node 2's lease ended: %v, want acme 100", got)
	}
	if fresh, err := s.UsageLease(ctx, l2, 10*time.Second); err != nil || fresh == l2 {
		t.Fatalf("an ended lease was renewed: %x, %v", fresh, err)
	}
	if err := s.PutUsage(ctx, 3, nil, 0); err == nil {
		t.Fatal("usage put without a lease")
	}
}

func FuzzDecodeUsage(f *testing.F) {
	f.Add([]byte(`{"v":1,"tenants":{"acme":1}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"tenants":{"a":-1}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		u, err := decodeUsage(raw)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("decode error %v is neither corrupt nor unknown version", err)
			}
			return
		}
		for tn, n := range u.Tenants {
			if n < 0 {
				t.Fatalf("tenant %q decoded with %d bytes", tn, n)
			}
		}
	})
}
