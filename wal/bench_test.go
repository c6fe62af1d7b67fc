package wal

import (
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// BenchmarkAppendSync appends batches of 1 KiB records to a log on the real
// disk and fsyncs after every batch, as a producer with acks=all on a
// single broker would see it.
func BenchmarkAppendSync(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			l, err := Open(vfs.OS, b.TempDir(), Config{}, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := mkBatch(size>>10, size-BatchHeaderSize, 1, 3)
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if _, _, err := l.Append(batch, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads 1 MiB at a time from a log of 16 KiB batches in memory.
func BenchmarkRead(b *testing.B) {
	l, err := Open(vfs.NewMem(), "/d", Config{SegmentBytes: 8 << 20}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := mkBatch(16, 16<<10-BatchHeaderSize, 1, 3)
	for range 2048 {
		if _, _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1 << 20)
	var off Offset
	for b.Loop() {
		data, err := l.Read(off, l.EndOffset(), 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		off += Offset(len(data) / len(batch) * 16)
		if off >= l.EndOffset() {
			off = 0
		}
	}
}
