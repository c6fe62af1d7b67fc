package wal

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// volatileBroker is what a broker keeps of package wal: a journal, three
// logs writing through it and one plain log, on a vfs.Volatile over a disk.
// kill kills it as SIGKILL would: the Volatile's held bytes are gone and
// nothing it does later reaches the disk.
type volatileBroker struct {
	fs   *vfs.Volatile
	dead *atomic.Bool
	j    *Journal
	logs []*Log // logs[3] is the plain one
}

func openVolatileBroker(t *testing.T, disk vfs.FS, root string, cfg Config, jcfg JournalConfig) *volatileBroker {
	t.Helper()
	dead := new(atomic.Bool)
	b := &volatileBroker{dead: dead, fs: vfs.NewVolatile(vfs.NewFaulty(disk, func(vfs.Op, string) error {
		if dead.Load() {
			return vfs.ErrInjected
		}
		return nil
	}))}
	var err error
	if b.j, err = OpenJournal(b.fs, filepath.Join(root, "journal"), jcfg, zerolog.Nop()); err != nil {
		t.Fatalf("open journal: %v", err)
	}
	for i := range 3 {
		key := fmt.Sprintf("t-%d", i)
		l, err := OpenJournaled(b.fs, filepath.Join(root, "wal", key), cfg, b.j, key, zerolog.Nop())
		if err != nil {
			t.Fatalf("open journaled log %s: %v", key, err)
		}
		b.logs = append(b.logs, l)
	}
	l, err := Open(b.fs, filepath.Join(root, "plain"), cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("open plain log: %v", err)
	}
	b.logs = append(b.logs, l)
	b.j.Start()
	return b
}

// kill stops b as SIGKILL would; closing afterwards only releases memory
// (its errors are those of a dead process).
func (b *volatileBroker) kill() {
	b.dead.Store(true)
	for _, l := range b.logs {
		_ = l.Close()
	}
	_ = b.j.Close()
}

// volatileCrashScenario appends, syncs, truncates, maintains and
// checkpoints at random, killing the broker now and then; after every
// restart each log must be a prefix of what was appended to it holding
// every batch that was durable.
func volatileCrashScenario(t *testing.T, disk vfs.FS, root string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5161))
	clock := newClock()
	cfg := Config{SegmentBytes: int64(1024 + rng.IntN(4096)), Now: clock.Now}
	jcfg := JournalConfig{FileBytes: int64(4096 + rng.IntN(8192)), CheckpointBytes: 1 << 40, CheckpointEvery: time.Hour}
	b := openVolatileBroker(t, disk, root, cfg, jcfg)
	models := make([]crashModel, len(b.logs))
	restart := func(step int) {
		t.Helper()
		durable := make([]Offset, len(b.logs))
		for k, l := range b.logs {
			durable[k] = l.DurableEnd()
		}
		b.kill()
		b = openVolatileBroker(t, disk, root, cfg, jcfg)
		for k, l := range b.logs {
			m := &models[k]
			m.dropBelow(l.StartOffset())
			got := readAll(t, l, 1<<20)
			if len(got) > len(m.batches) || !equalBatches(got, m.batches[:len(got)]) {
				t.Fatalf("step %d log %d: recovered %d batches that are not a prefix of the %d appended", step, k, len(got), len(m.batches))
			}
			if l.EndOffset() < durable[k] {
				t.Fatalf("step %d log %d: recovered up to %d, but %d was durable", step, k, l.EndOffset(), durable[k])
			}
			checkInvariants(t, l, true)
			checkEpochChain(t, l)
			m.batches = m.batches[:len(got)]
		}
	}
	for step := range 250 {
		k := rng.IntN(len(b.logs))
		l := b.logs[k]
		switch op := rng.IntN(100); {
		case op < 55:
			var group [][]byte
			for range 1 + rng.IntN(4) {
				group = append(group, mkBatch(1+rng.IntN(5), 20+rng.IntN(300), clock.Now().UnixMilli(), byte(step)))
			}
			for i, res := range l.AppendGroup(group, Epoch(step)) {
				if res.Err != nil {
					t.Fatalf("step %d log %d: append: %v", step, k, res.Err)
				}
				models[k].batches = append(models[k].batches, append([]byte(nil), group[i]...))
			}
		case op < 72:
			if _, err := l.Sync(); err != nil {
				t.Fatalf("step %d log %d: sync: %v", step, k, err)
			}
		case op < 76 && len(models[k].batches) > 1:
			h, _ := ParseBatchHeader(models[k].batches[rng.IntN(len(models[k].batches))])
			if h.BaseOffset < l.StartOffset() {
				break
			}
			if err := l.Truncate(h.BaseOffset); err != nil {
				t.Fatalf("step %d log %d: truncate to %d: %v", step, k, h.BaseOffset, err)
			}
			models[k].cut(h.BaseOffset)
		case op < 81:
			clock.Advance(time.Minute)
			if _, err := l.Maintain(); err != nil {
				t.Fatalf("step %d log %d: maintain: %v", step, k, err)
			}
			if _, err := deleteOldest(l, int64(2048+rng.IntN(8192))); err != nil {
				t.Fatalf("step %d log %d: delete: %v", step, k, err)
			}
			models[k].dropBelow(l.StartOffset())
		case op < 88:
			if err := b.j.Checkpoint(); err != nil {
				t.Fatalf("step %d: checkpoint: %v", step, err)
			}
		case op < 90:
			if err := b.fs.Flush(); err != nil {
				t.Fatalf("step %d: flush: %v", step, err)
			}
		default:
			restart(step)
		}
	}
	// A graceful stop: with everything flushed, the plain log keeps even
	// what it never synced.
	end := b.logs[3].EndOffset()
	if err := b.fs.Flush(); err != nil {
		t.Fatalf("final flush: %v", err)
	}
	restart(-1)
	if got := b.logs[3].EndOffset(); got != end {
		t.Fatalf("the plain log ends at %d after a flush and a kill, was %d", got, end)
	}
	b.kill()
}

func TestVolatileCrashRecovery(t *testing.T) {
	seeds := uint64(12)
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with: go test ./wal -run 'TestVolatileCrashRecovery/seed=%d$'", seed)
				}
			}()
			t.Run("os", func(t *testing.T) { volatileCrashScenario(t, vfs.OS, t.TempDir(), seed) })
			t.Run("mem", func(t *testing.T) { volatileCrashScenario(t, vfs.NewMem(), "/data", seed) })
		})
	}
}
