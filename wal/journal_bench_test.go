package wal

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// BenchmarkJournalRecovery measures the worst replay a crash can leave with
// the default checkpoint interval: CheckpointBytes of journal, written by 8
// logs in 16 KiB batches, none of it in fsynced segments. It reports the
// journal bytes replayed per second of OpenJournal plus OpenJournaled (the
// in-memory file system: the CPU side; the disk reads the journal once,
// sequentially, on top).
//
//	go test ./wal -run '^$' -bench JournalRecovery -benchtime 3x
func BenchmarkJournalRecovery(b *testing.B) {
	mem := vfs.NewMem()
	cfg := Config{}
	jcfg := JournalConfig{CheckpointBytes: 1 << 40, CheckpointEvery: time.Hour}
	f := mustJournalFixture(b, mem, cfg, jcfg, 8)
	var written int64
	for written < DefaultJournalCheckpointBytes {
		for i, l := range f.logs {
			batch := mkBatch(16, 16<<10, written, byte(i))
			if res := l.AppendGroup([][]byte{batch}, 1); res[0].Err != nil {
				b.Fatal(res[0].Err)
			}
			written += int64(len(batch))
		}
		if _, err := f.logs[0].Sync(); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range f.logs {
		if _, err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	crashed := mem.CrashClone()
	f.close()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		disk := crashed.CrashClone()
		b.StartTimer()
		j, err := OpenJournal(disk, "/data/journal", jcfg, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		for i := range 8 {
			l, err := OpenJournaled(disk, fmt.Sprintf("/data/wal/t-%d", i), cfg, j, fmt.Sprintf("t-%d", i), zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			if l.EndOffset() == 0 {
				b.Fatal("nothing replayed")
			}
			b.StopTimer()
			_ = l.Close()
			b.StartTimer()
		}
		b.StopTimer()
		_ = j.Close()
		b.StartTimer()
	}
	b.SetBytes(written)
}
