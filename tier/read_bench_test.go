package tier

// BenchmarkReadWarm measures the CPU and the bytes allocated by one remote
// read of a replay whose chunks are all in the read cache: finding the
// objects, slicing whole batches out of the cached chunks and joining them
// into the response, without the object store's cost. A replay from
// object storage pays this for every fetch it is answered.
//
//	go test -run '^$' -bench ReadWarm -benchmem ./tier/

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

func BenchmarkReadWarm(b *testing.B) {
	// 8 MiB of 16 KiB records, one record a batch as a producer that
	// lingers little sends them; 1 MiB segments, 256 KiB chunks.
	f := newFixtureSized(b, mem.New(), fixtureSizes{segment: 1 << 20, chunk: 256 << 10, upload: 1 << 20})
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: 0, LocalRetentionBytes: Unlimited, Grace: time.Minute}
	value := 16 << 10
	for range 512 {
		if _, _, err := f.p.log.Append(batch(1, value, f.clock.Now().UnixMilli()), 1); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := f.p.log.Sync(); err != nil {
		b.Fatal(err)
	}
	for range 4 {
		f.clock.Advance(time.Second)
		f.pass(b, policy)
	}
	h, err := f.store.RemoteHead(b.Context(), f.p.id, 0)
	if err != nil {
		b.Fatal(err)
	}
	if h.RemoteEnd < 400 {
		b.Fatalf("remote end %d after uploads, want most of 512 records", h.RemoteEnd)
	}
	for _, size := range []int{1 << 20, 4 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			read := func(from wal.Offset) int {
				data, err := f.m.Read(b.Context(), f.p.id, 0, from, size)
				if err != nil {
					b.Fatal(err)
				}
				return len(data)
			}
			// Every chunk in the cache before the clock starts.
			for from := wal.Offset(0); from+wal.Offset(size/value) < wal.Offset(h.RemoteEnd); from += wal.Offset(size / value) {
				read(from)
			}
			span := wal.Offset(h.RemoteEnd) - wal.Offset(size/value)
			b.ResetTimer()
			var n int64
			for i := 0; b.Loop(); i++ {
				n += int64(read(wal.Offset(i*7) % span))
			}
			b.SetBytes(n / int64(b.N))
		})
	}
}

func sizeName(n int) string {
	return map[int]string{1 << 20: "1MiB", 4 << 20: "4MiB"}[n]
}
