package object

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// benchBatches returns n contiguous batches of 16 records of about 1 KiB.
func benchBatches(n int) ([][]byte, int) {
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 16
	}
	batches := run(0, 0, 1_700_000_000_000, 1000, counts...)
	total := 0
	for _, b := range batches {
		total += len(b)
	}
	return batches, total
}

// BenchmarkBuild adds 64 MiB of 16 KiB batches to a Builder and finishes
// the object, as an upload of one object does.
func BenchmarkBuild(b *testing.B) {
	batches, total := benchBatches(64 << 20 / (16 << 10))
	epochs := []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}
	snap := make([]byte, 4<<10)
	b.SetBytes(int64(total))
	for b.Loop() {
		bd, err := NewBuilder(BuilderConfig{SizeHint: total + 1<<20})
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range batches {
			if err := bd.Add(batch); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := bd.Finish(epochs, snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyChunk checks one default-sized (4 MiB) chunk of 16 KiB
// batches, as a reader does after each ranged GET.
func BenchmarkVerifyChunk(b *testing.B) {
	batches, _ := benchBatches(DefaultTargetChunkBytes / (16 << 10))
	obj, f := build(b, BuilderConfig{}, batches, []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}, nil)
	data := chunkBytes(&f, obj, 0)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := VerifyChunk(&f, 0, data); err != nil {
			b.Fatal(err)
		}
	}
}
