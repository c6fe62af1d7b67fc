package object

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// TestBuildAndRead builds objects and reads them back through the reader's
// path: footer from the tail, every chunk verified and walked, the
// snapshot checked.
func TestBuildAndRead(t *testing.T) {
	oneEpoch := []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}
	tests := []struct {
		name       string
		target     int
		batches    func(t *testing.T) [][]byte
		epochs     []wal.EpochEntry
		snap       []byte
		wantChunks [][]int // batch indexes in each chunk
		wantEpochs []wal.EpochEntry
	}{{
		name:       "one batch",
		batches:    func(*testing.T) [][]byte { return run(0, 0, 1_000, 10, 5) },
		epochs:     oneEpoch,
		snap:       []byte("snapshot"),
		wantChunks: [][]int{{0}},
		wantEpochs: oneEpoch,
	}, {
		name:       "one record at a high base offset",
		batches:    func(*testing.T) [][]byte { return run(1<<40, 9, 1_000, 0, 1) },
		epochs:     []wal.EpochEntry{{Epoch: 9, StartOffset: 5}},
		wantChunks: [][]int{{0}},
		wantEpochs: []wal.EpochEntry{{Epoch: 9, StartOffset: 1 << 40}},
	}, {
		name:   "exactly at target: two batches fill a chunk",
		target: 1000,
		batches: func(t *testing.T) [][]byte {
			var out [][]byte
			for i := range 5 {
				out = append(out, mkBatchSized(t, wal.Offset(i), 0, int64(i), 500))
			}
			return out
		},
		epochs:     oneEpoch,
		wantChunks: [][]int{{0, 1}, {2, 3}, {4}},
		wantEpochs: oneEpoch,
	}, {
		name:   "one byte past target starts a chunk",
		target: 999,
		batches: func(t *testing.T) [][]byte {
			return [][]byte{mkBatchSized(t, 0, 0, 0, 500), mkBatchSized(t, 1, 0, 1, 500), mkBatchSized(t, 2, 0, 2, 499)}
		},
		epochs:     oneEpoch,
		wantChunks: [][]int{{0}, {1, 2}},
		wantEpochs: oneEpoch,
	}, {
		name:   "batch larger than target is a chunk of its own",
		target: 300,
		batches: func(t *testing.T) [][]byte {
			return [][]byte{mkBatchSized(t, 0, 0, 0, 100), mkBatchSized(t, 1, 0, 1, 1000), mkBatchSized(t, 2, 0, 2, 100)}
		},
		epochs:     oneEpoch,
		wantChunks: [][]int{{0}, {1}, {2}},
		wantEpochs: oneEpoch,
	}, {
		name:       "many chunks",
		target:     512,
		batches:    func(*testing.T) [][]byte { return run(10, 0, 5, 30, slices.Repeat([]int{1, 2, 3, 4}, 25)...) },
		epochs:     []wal.EpochEntry{{Epoch: 0, StartOffset: 10}},
		wantEpochs: []wal.EpochEntry{{Epoch: 0, StartOffset: 10}},
	}, {
		name:   "epochs clamped: one before base, one inside, one at next, one after",
		target: 1 << 20,
		batches: func(*testing.T) [][]byte {
			return append(run(100, 4, 0, 5, 3, 2), run(105, 6, 10, 5, 1, 4)...)
		},
		epochs: []wal.EpochEntry{
			{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 90}, {Epoch: 6, StartOffset: 105},
			{Epoch: 7, StartOffset: 110}, {Epoch: 8, StartOffset: 200},
		},
		wantChunks: [][]int{{0, 1, 2, 3}},
		wantEpochs: []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 6, StartOffset: 105}},
	}, {
		name:   "epoch entry exactly at base",
		target: 1,
		batches: func(*testing.T) [][]byte {
			return append(run(100, 4, 0, 5, 3), run(103, 5, 10, 5, 1)...)
		},
		epochs:     []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 5, StartOffset: 103}},
		wantChunks: [][]int{{0}, {1}},
		wantEpochs: []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 5, StartOffset: 103}},
	}, {
		name:   "timestamps out of order and none (-1)",
		target: 1,
		batches: func(*testing.T) [][]byte {
			return [][]byte{
				mkBatch(spec{base: 0, records: 2, ts: 500}),
				mkBatch(spec{base: 2, records: 1, ts: 100}),
				mkBatch(spec{base: 3, records: 1, ts: -1}),
			}
		},
		epochs:     oneEpoch,
		wantChunks: [][]int{{0}, {1}, {2}},
		wantEpochs: oneEpoch,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			batches := tc.batches(t)
			cfg := BuilderConfig{TargetChunkBytes: tc.target, Partition: 3, TopicID: [16]byte{0xab}}
			obj, built := build(t, cfg, batches, tc.epochs, tc.snap)
			f, err := ParseFooter(obj, int64(len(obj)))
			if err != nil {
				t.Fatalf("parse footer: %v", err)
			}
			if !reflect.DeepEqual(*f, built) {
				t.Fatalf("parsed footer\n%+v\nbuilt\n%+v", *f, built)
			}
			checkFacts(t, f, obj, batches, cfg)
			if got := f.Epochs(); !slices.Equal(got, tc.wantEpochs) {
				t.Errorf("epochs %v, want %v", got, tc.wantEpochs)
			}
			if tc.wantChunks != nil {
				checkChunking(t, f, batches, tc.wantChunks)
			}
			readChunks(t, f, obj, batches, cfg.WithDefaults().TargetChunkBytes)
			pos, n := f.SnapshotRange()
			if err := VerifySnapshot(f, obj[pos:pos+n]); err != nil || !bytes.Equal(obj[pos:pos+n], tc.snap) {
				t.Errorf("snapshot %q (%v), want %q", obj[pos:pos+n], err, tc.snap)
			}
		})
	}
}

// checkFacts checks the footer's scalar facts against what was built.
func checkFacts(t *testing.T, f *Footer, obj []byte, batches [][]byte, cfg BuilderConfig) {
	t.Helper()
	first, last := header(t, batches[0]), header(t, batches[len(batches)-1])
	if f.BaseOffset != first.BaseOffset || f.NextOffset != last.LastOffset()+1 {
		t.Errorf("offsets [%d, %d), want [%d, %d)", f.BaseOffset, f.NextOffset, first.BaseOffset, last.LastOffset()+1)
	}
	if f.ObjectSize != int64(len(obj)) || f.Partition != cfg.Partition || f.TopicID != cfg.TopicID {
		t.Errorf("size %d topic %x partition %d, want %d %x %d", f.ObjectSize, f.TopicID, f.Partition, len(obj), cfg.TopicID, cfg.Partition)
	}
	maxTS := int64(-1)
	for _, b := range batches {
		maxTS = max(maxTS, header(t, b).MaxTimestamp)
	}
	if f.MaxTimestamp() != maxTS {
		t.Errorf("max timestamp %d, want %d", f.MaxTimestamp(), maxTS)
	}
}

// checkChunking checks which batches went into which chunk.
func checkChunking(t *testing.T, f *Footer, batches [][]byte, want [][]int) {
	t.Helper()
	if f.NumChunks() != len(want) {
		t.Fatalf("%d chunks, want %d: %+v", f.NumChunks(), len(want), f.Chunks())
	}
	for i, idx := range want {
		c := f.Chunk(i)
		first, last := header(t, batches[idx[0]]), header(t, batches[idx[len(idx)-1]])
		if c.FirstOffset != first.BaseOffset || c.LastOffset != last.LastOffset() || c.BatchCount != len(idx) {
			t.Errorf("chunk %d: %+v, want batches %v", i, c, idx)
		}
	}
}

// readChunks verifies every chunk, walks its batches against the ones
// added, and checks the chunk entries' timestamps and sizes.
func readChunks(t *testing.T, f *Footer, obj []byte, batches [][]byte, target int) {
	t.Helper()
	var got [][]byte
	for i := range f.NumChunks() {
		data := chunkBytes(f, obj, i)
		if err := VerifyChunk(f, i, data); err != nil {
			t.Fatalf("verify chunk %d: %v", i, err)
		}
		c := f.Chunk(i)
		minTS, maxTS, n := int64(0), int64(0), 0
		err := Batches(data, func(b []byte) error {
			h := header(t, b)
			if n == 0 {
				minTS, maxTS = h.BaseTimestamp, h.MaxTimestamp
			}
			minTS, maxTS = min(minTS, h.BaseTimestamp), max(maxTS, h.MaxTimestamp)
			n++
			got = append(got, b)
			return nil
		})
		if err != nil {
			t.Fatalf("batches of chunk %d: %v", i, err)
		}
		if c.MinTimestamp != minTS || c.MaxTimestamp != maxTS || c.BatchCount != n {
			t.Errorf("chunk %d: %+v, want timestamps [%d, %d] and %d batches", i, c, minTS, maxTS, n)
		}
		if c.Length > int64(target) && n > 1 {
			t.Errorf("chunk %d of %d bytes and %d batches exceeds target %d", i, c.Length, n, target)
		}
		if i+1 < f.NumChunks() && c.Length+int64(len(batches[len(got)])) <= int64(target) {
			t.Errorf("chunk %d of %d bytes closed, but the next batch (%d bytes) fits the target %d", i, c.Length, len(batches[len(got)]), target)
		}
	}
	if len(got) != len(batches) {
		t.Fatalf("read %d batches, added %d", len(got), len(batches))
	}
	for i := range got {
		if !bytes.Equal(got[i], batches[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

func TestAddErrors(t *testing.T) {
	good := run(10, 2, 0, 8, 3)[0]
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	badMagic := bytes.Clone(good)
	badMagic[16] = 1
	tests := []struct {
		name  string
		batch []byte
		also  error // a wal marker the error also carries
	}{
		{"gap", mkBatch(spec{base: 14, epoch: 2, records: 1}), nil},
		{"overlap", mkBatch(spec{base: 12, epoch: 2, records: 1}), nil},
		{"same base again", mkBatch(spec{base: 10, epoch: 2, records: 1}), nil},
		{"lower epoch", mkBatch(spec{base: 13, epoch: 1, records: 1}), nil},
		{"unstamped epoch", mkBatch(spec{base: 13, epoch: -1, records: 1}), nil},
		{"truncated", mkBatch(spec{base: 13, epoch: 2, records: 2})[:70], wal.ErrInvalidBatch},
		{"trailing bytes", append(mkBatch(spec{base: 13, epoch: 2, records: 1}), 0), wal.ErrInvalidBatch},
		{"two batches", slices.Concat(run(13, 2, 0, 0, 1, 1)...), wal.ErrInvalidBatch},
		{"short header", good[:40], wal.ErrInvalidBatch},
		{"empty", nil, wal.ErrInvalidBatch},
		{"bad magic", badMagic, wal.ErrInvalidBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBuilder(BuilderConfig{TargetChunkBytes: 100})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Add(good); err != nil {
				t.Fatal(err)
			}
			if err := b.Add(tc.batch); !errors.Is(err, ErrInvalid) || tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("add: %v, want ErrInvalid and %v", err, tc.also)
			}
			if b.Len() != len(good) || b.NextOffset() != 13 || b.BaseOffset() != 10 {
				t.Fatalf("failed add changed the builder: len %d next %d base %d", b.Len(), b.NextOffset(), b.BaseOffset())
			}
			next := mkBatch(spec{base: 13, epoch: 2, records: 1})
			if err := b.Add(next); err != nil {
				t.Fatalf("add after a failed add: %v", err)
			}
			obj, f, err := b.Finish([]wal.EpochEntry{{Epoch: 2, StartOffset: 0}}, nil)
			if err != nil || f.NextOffset != 14 || f.NumChunks() != 2 {
				t.Fatalf("finish: %v, %+v", err, f)
			}
			if _, err := ParseFooter(obj, int64(len(obj))); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("bad crc", func(t *testing.T) {
		b, _ := NewBuilder(BuilderConfig{})
		if err := b.Add(badCRC); !errors.Is(err, ErrInvalid) || !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("add: %v, want ErrInvalid and wal.ErrCorrupt", err)
		}
		if b.NextOffset() != wal.UndefinedOffset || b.BaseOffset() != wal.UndefinedOffset || b.Len() != 0 {
			t.Fatalf("failed first add changed the builder")
		}
	})
}

func TestFinishErrors(t *testing.T) {
	batches := append(run(100, 4, 0, 5, 3), run(103, 6, 10, 5, 2)...)
	good := []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 6, StartOffset: 103}}
	tests := []struct {
		name   string
		epochs []wal.EpochEntry
	}{
		{"none", nil},
		{"starts after base", []wal.EpochEntry{{Epoch: 4, StartOffset: 101}, {Epoch: 6, StartOffset: 103}}},
		{"transition missing", []wal.EpochEntry{{Epoch: 4, StartOffset: 0}}},
		{"transition at the wrong offset", []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 6, StartOffset: 104}}},
		{"wrong epoch", []wal.EpochEntry{{Epoch: 3, StartOffset: 100}, {Epoch: 6, StartOffset: 103}}},
		{"extra entry", []wal.EpochEntry{{Epoch: 4, StartOffset: 100}, {Epoch: 5, StartOffset: 102}, {Epoch: 6, StartOffset: 103}}},
		{"epochs decrease", []wal.EpochEntry{{Epoch: 6, StartOffset: 50}, {Epoch: 4, StartOffset: 100}, {Epoch: 6, StartOffset: 103}}},
		{"starts decrease", []wal.EpochEntry{{Epoch: 1, StartOffset: 100}, {Epoch: 4, StartOffset: 50}, {Epoch: 6, StartOffset: 103}}},
		{"negative epoch", []wal.EpochEntry{{Epoch: -1, StartOffset: 0}, {Epoch: 4, StartOffset: 100}, {Epoch: 6, StartOffset: 103}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := NewBuilder(BuilderConfig{})
			for _, batch := range batches {
				if err := b.Add(batch); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := b.Finish(tc.epochs, nil); !errors.Is(err, ErrInvalid) {
				t.Fatalf("finish: %v, want ErrInvalid", err)
			}
			obj, _, err := b.Finish(good, nil)
			if err != nil {
				t.Fatalf("finish after a failed finish: %v", err)
			}
			if _, err := ParseFooter(obj, int64(len(obj))); err != nil {
				t.Fatal(err)
			}
			if err := b.Add(mkBatch(spec{base: 105, epoch: 6, records: 1})); !errors.Is(err, ErrInvalid) {
				t.Fatalf("add after finish: %v", err)
			}
			if _, _, err := b.Finish(good, nil); !errors.Is(err, ErrInvalid) {
				t.Fatalf("finish twice: %v", err)
			}
		})
	}
	t.Run("no batches", func(t *testing.T) {
		b, _ := NewBuilder(BuilderConfig{})
		if _, _, err := b.Finish(good, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("finish: %v, want ErrInvalid", err)
		}
	})
}

func TestBuilderConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  BuilderConfig
		ok   bool
	}{
		{"defaults", BuilderConfig{}, true},
		{"one byte chunks", BuilderConfig{TargetChunkBytes: 1}, true},
		{"largest target", BuilderConfig{TargetChunkBytes: MaxTargetChunkBytes}, true},
		{"target too large", BuilderConfig{TargetChunkBytes: MaxTargetChunkBytes + 1}, false},
		{"negative target", BuilderConfig{TargetChunkBytes: -1}, false},
		{"negative partition", BuilderConfig{Partition: -1}, false},
		{"negative size hint", BuilderConfig{SizeHint: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewBuilder(tc.cfg)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("new builder: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if got := (BuilderConfig{}).WithDefaults().TargetChunkBytes; got != DefaultTargetChunkBytes {
		t.Fatalf("default target %d", got)
	}
}

func TestClampEpochs(t *testing.T) {
	chain := []wal.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}, {Epoch: 4, StartOffset: 20}, {Epoch: 7, StartOffset: 30}}
	tests := []struct {
		name       string
		base, next wal.Offset
		want       []wal.EpochEntry
	}{
		{"inside the first", 2, 5, []wal.EpochEntry{{Epoch: 1, StartOffset: 2}}},
		{"at an entry's start", 10, 11, []wal.EpochEntry{{Epoch: 3, StartOffset: 10}}},
		{"ending right before an entry", 5, 10, []wal.EpochEntry{{Epoch: 1, StartOffset: 5}}},
		{"spanning two", 15, 25, []wal.EpochEntry{{Epoch: 3, StartOffset: 15}, {Epoch: 4, StartOffset: 20}}},
		{"spanning all", 0, 100, chain},
		{"after the last", 50, 60, []wal.EpochEntry{{Epoch: 7, StartOffset: 50}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClampEpochs(chain, tc.base, tc.next)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("clamp [%d, %d): %v %v, want %v", tc.base, tc.next, got, err, tc.want)
			}
		})
	}
	if _, err := ClampEpochs(chain[1:], 5, 12); !errors.Is(err, ErrInvalid) {
		t.Fatalf("clamp below the chain: %v", err)
	}
}

// TestLimits fills a builder to MaxChunks chunks and to MaxEpochs epochs:
// one more is refused, and the largest footers still read back.
func TestLimits(t *testing.T) {
	tests := []struct {
		name     string
		target   int
		newEpoch bool // every batch in an epoch of its own
	}{
		{"chunks", 1, false},
		{"epochs", MaxTargetChunkBytes, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := NewBuilder(BuilderConfig{TargetChunkBytes: tc.target})
			batch := func(i int) []byte {
				epoch := wal.Epoch(0)
				if tc.newEpoch {
					epoch = wal.Epoch(i)
				}
				return mkBatch(spec{base: wal.Offset(i), epoch: epoch, records: 1})
			}
			for i := range MaxChunks {
				if err := b.Add(batch(i)); err != nil {
					t.Fatalf("add %d: %v", i, err)
				}
			}
			if err := b.Add(batch(MaxChunks)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("add past the limit: %v", err)
			}
			epochs := []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}
			if tc.newEpoch {
				epochs = epochs[:0]
				for i := range MaxEpochs {
					epochs = append(epochs, wal.EpochEntry{Epoch: wal.Epoch(i), StartOffset: wal.Offset(i)})
				}
			}
			obj, built, err := b.Finish(epochs, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ParseFooter(obj, int64(len(obj)))
			if err != nil || !reflect.DeepEqual(*f, built) {
				t.Fatalf("parse: %v", err)
			}
			if err := VerifyChunk(f, f.NumChunks()-1, chunkBytes(f, obj, f.NumChunks()-1)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
