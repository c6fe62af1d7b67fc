package fair

import (
	"context"
	"testing"
)

// BenchmarkRunUncontended is the cost a request pays for fair scheduling on
// a broker that is not busy: one Acquire and one Done that never wait.
//
//	go test -run '^$' -bench . ./broker/fair/
func BenchmarkRunUncontended(b *testing.B) {
	s, err := NewSet(SetConfig{HandlerSlots: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		_ = s.RunTimed(ctx, "t", func() {})
	}
}

// BenchmarkRunContended: 8 goroutines of 4 tenants on 2 slots, so every
// grant is queued and dispatched by DRR.
func BenchmarkRunContended(b *testing.B) {
	s, err := NewSet(SetConfig{HandlerSlots: 2})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tenants := []string{"a", "b", "c", "d"}
	b.SetParallelism(4)
	i := 0
	b.RunParallel(func(pb *testing.PB) {
		i++
		t := tenants[i%len(tenants)]
		for pb.Next() {
			_ = s.Run(ctx, s.Handler, t, func() float64 { return 1000 })
		}
	})
}

// BenchmarkRunNoSet is the same call with scheduling off: the baseline of
// BenchmarkRunUncontended in the same run.
func BenchmarkRunNoSet(b *testing.B) {
	var s *Set
	ctx := context.Background()
	for b.Loop() {
		_ = s.RunTimed(ctx, "t", func() {})
	}
}
