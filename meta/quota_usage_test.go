package meta

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestDecodeQuotaUsage(t *testing.T) {
	for _, tc := range []struct {
		name, key, val string
		want           error
	}{
		{"newer version", "2", `{"v":2,"tenants":{}}`, ErrUnknownVersion},
		{"no version", "2", `{"tenants":{}}`, ErrCorrupt},
		{"not json", "2", `{`, ErrCorrupt},
		{"bad node", "02", `{"v":1,"tenants":{}}`, ErrCorrupt},
		{"negative node", "-1", `{"v":1,"tenants":{}}`, ErrCorrupt},
		{"good", "3", `{"v":1,"tenants":{"acme":{"producer_byte_rate":5}}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeQuotaUsage(tc.key, []byte(tc.val))
			if !errors.Is(err, tc.want) {
				t.Fatalf("decode %s = %v, want %v", tc.val, err, tc.want)
			}
		})
	}
}

// FuzzDecodeQuotaUsage: no value panics the decoder, and what decodes
// encodes and decodes again to the same.
func FuzzDecodeQuotaUsage(f *testing.F) {
	f.Add("1", []byte(`{"v":1,"tenants":{"acme":{"producer_byte_rate":262144,"connections":3}}}`))
	f.Add("7", []byte(`{"v":1}`))
	f.Add("x", []byte(`{"v":9,"tenants":null}`))
	f.Fuzz(func(t *testing.T, key string, val []byte) {
		id, u, err := decodeQuotaUsage(key, val)
		if err != nil {
			return
		}
		again, err := json.Marshal(quotaUsageRecord{V: quotaUsageVersion, Tenants: u})
		if err != nil {
			return // a NaN cannot come from JSON; nothing else fails
		}
		id2, u2, err := decodeQuotaUsage(key, again)
		if err != nil || id2 != id || !reflect.DeepEqual(u, u2) {
			t.Fatalf("re-decode of %s: %d %v %v, want %d %v", again, id2, u2, err, id, u)
		}
	})
}

// TestQuotaUsagePublishAndLease: each broker's usage is read back by
// node, and goes with the registration lease it was written under.
func TestQuotaUsagePublishAndLease(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	r1 := register(t, s, testBroker(1), 0)
	r2 := register(t, s, testBroker(2), 0)
	u1 := QuotaUsage{"acme": {"producer_byte_rate": 1000}}
	u2 := QuotaUsage{"acme": {"producer_byte_rate": 3000}, "globex": {"connections": 2}}
	if err := s.PublishQuotaUsage(ctx, 1, r1.Info().Lease, u1); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishQuotaUsage(ctx, 2, r2.Info().Lease, u2); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishQuotaUsage(ctx, 3, 0, u2); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("publish without a lease: %v", err)
	}
	got, err := s.QuotaUsages(ctx)
	if err != nil || !reflect.DeepEqual(got, map[int32]QuotaUsage{1: u1, 2: u2}) {
		t.Fatalf("QuotaUsages = %v, %v", got, err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if err := r2.Close(cctx); err != nil {
		t.Fatal(err)
	}
	got, err = s.QuotaUsages(ctx)
	if err != nil || !reflect.DeepEqual(got, map[int32]QuotaUsage{1: u1}) {
		t.Fatalf("after node 2 deregistered: %v, %v", got, err)
	}
}
