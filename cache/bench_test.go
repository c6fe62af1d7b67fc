package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkGetHit measures Get of cached 4 KiB entries from parallel readers.
func BenchmarkGetHit(b *testing.B) {
	c, err := New(Config{MaxBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	const keys = 1024
	names := make([]string, keys)
	var calls atomic.Int64
	for i := range names {
		names[i] = fmt.Sprintf("0a1b/topic-id/00000000000000000000-%d#%d", i%16, i)
		if _, err := c.Get(b.Context(), names[i], constFill(make([]byte, 4<<10), &calls)); err != nil {
			b.Fatal(err)
		}
	}
	miss := func(context.Context) ([]byte, error) { return nil, errors.New("miss: the entry was evicted") }
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := c.Get(b.Context(), names[i%keys], miss); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	if s := c.Stats(); s.Fills != keys {
		b.Fatalf("%d fills during the benchmark: entries were evicted", s.Fills-keys)
	}
}
