package wal

import (
	"fmt"
	"path/filepath"
	"slices"
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

// BenchmarkJournalSmallBesideLarge measures, on the real disk, what a log
// appending large batches costs another log's small appends: one log
// appends a 1 MB batch every 50 ms and waits for it to be durable, while
// another appends a 1 KiB batch and syncs it, b.N times, 2 ms apart. It
// reports the small appends' sync latency (p50, p99, max) and the large
// batches' mean. Arms: alone (no large batches), shared (one journal, as
// the broker runs), separate (the large log on a journal of its own, on
// the same disk). Compare arms of one run; the disk's own stalls move them
// all. docs/architecture.md ("Tenants share the journal") reads the
// figures, and those of a journal that wrote large batches in parts.
//
//	go test ./wal -run '^$' -bench JournalSmallBesideLarge -benchtime 3000x
func BenchmarkJournalSmallBesideLarge(b *testing.B) {
	for _, arm := range []struct {
		name     string
		large    bool
		separate bool
	}{{"alone", false, false}, {"shared", true, false}, {"separate", true, true}} {
		b.Run(arm.name, func(b *testing.B) {
			dir := b.TempDir()
			jcfg := JournalConfig{}
			open := func(jdir string, keys ...string) (*Journal, []*Log) {
				j, err := OpenJournal(vfs.OS, filepath.Join(dir, jdir), jcfg, zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				var logs []*Log
				for _, k := range keys {
					l, err := OpenJournaled(vfs.OS, filepath.Join(dir, "wal", k), Config{}, j, k, zerolog.Nop())
					if err != nil {
						b.Fatal(err)
					}
					logs = append(logs, l)
				}
				j.Start()
				return j, logs
			}
			var large, small *Log
			if arm.separate {
				j1, l1 := open("journal-1", "large")
				j2, l2 := open("journal-2", "small")
				large, small = l1[0], l2[0]
				defer func() { _ = large.Close(); _ = small.Close(); _ = j1.Close(); _ = j2.Close() }()
			} else {
				j, ls := open("journal", "large", "small")
				large, small = ls[0], ls[1]
				defer func() { _ = large.Close(); _ = small.Close(); _ = j.Close() }()
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			var largeTook time.Duration
			var largeN int
			go func() {
				defer close(done)
				t := time.NewTicker(50 * time.Millisecond)
				defer t.Stop()
				batch := mkBatch(64, 1<<20, 1, 'L')
				for arm.large {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					began := time.Now()
					if res := large.AppendGroup([][]byte{batch}, 1); res[0].Err != nil {
						b.Error(res[0].Err)
						return
					}
					if _, err := large.Sync(); err != nil {
						b.Error(err)
						return
					}
					largeTook += time.Since(began)
					largeN++
				}
			}()
			batch := mkBatch(1, 1<<10, 1, 's')
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				began := time.Now()
				if res := small.AppendGroup([][]byte{batch}, 1); res[0].Err != nil {
					b.Fatal(res[0].Err)
				}
				if _, err := small.Sync(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(began))
				time.Sleep(2 * time.Millisecond)
			}
			b.StopTimer()
			close(stop)
			<-done
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "small-p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "small-p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "small-max-ms")
			if largeN > 0 {
				b.ReportMetric(ms(largeTook/time.Duration(largeN)), "large-mean-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
