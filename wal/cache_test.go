package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// dropFS is a vfs.Mem whose files record DropCache calls and the size each
// had at its last Sync, and fail the test on a drop of bytes not synced.
type dropFS struct {
	vfs.FS
	t      testing.TB
	mu     sync.Mutex
	synced map[string]int64
	drops  map[string][][2]int64 // path -> [off, end) in call order
}

func newDropFS(t testing.TB) *dropFS {
	return &dropFS{FS: vfs.NewMem(), t: t, synced: map[string]int64{}, drops: map[string][][2]int64{}}
}

func (d *dropFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &dropFile{File: f, fs: d, path: name}, nil
}

func (d *dropFS) Create(name string) (vfs.File, error) {
	return d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (d *dropFS) Open(name string) (vfs.File, error) { return d.OpenFile(name, os.O_RDONLY, 0) }

func (d *dropFS) segmentDrops() map[string][][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][][2]int64{}
	for p, r := range d.drops {
		if strings.HasSuffix(p, logSuffix) {
			out[p] = slices.Clone(r)
		}
	}
	return out
}

type dropFile struct {
	vfs.File
	fs   *dropFS
	path string
}

func (f *dropFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.synced[f.path] = size
	f.fs.mu.Unlock()
	return nil
}

func (f *dropFile) DropCache(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if n <= 0 || off < 0 || off%cachePage != 0 || (off+n)%cachePage != 0 {
		f.fs.t.Errorf("drop of [%d, %d) in %s: empty or not page-aligned", off, off+n, f.path)
	}
	if off+n > f.fs.synced[f.path] {
		f.fs.t.Errorf("drop of [%d, %d) in %s beyond its synced %d bytes", off, off+n, f.path, f.fs.synced[f.path])
	}
	f.fs.drops[f.path] = append(f.fs.drops[f.path], [2]int64{off, off + n})
	return nil
}

// checkDrops checks the drops of dir's segments against their final sizes:
// each segment's drops are contiguous from 0, and they end where the tail
// of keep bytes (counted from the log's end, over the segments in order)
// begins, rounded down to a page.
func checkDrops(t *testing.T, d *dropFS, dir string, keep int64) {
	t.Helper()
	names, err := d.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, logSuffix) {
			segs = append(segs, filepath.Join(dir, n))
		}
	}
	slices.Sort(segs) // zero-padded base offsets
	drops := d.segmentDrops()
	after := int64(0) // bytes in newer segments
	dropped := 0
	for i := len(segs) - 1; i >= 0; i-- {
		st, err := d.Stat(segs[i])
		if err != nil {
			t.Fatal(err)
		}
		size := st.Size()
		want := max(size-max(keep-after, 0), 0) &^ (cachePage - 1)
		after += size
		end := int64(0)
		for _, r := range drops[segs[i]] {
			if r[0] != end {
				t.Errorf("%s: drop [%d, %d) does not continue the previous one, which ended at %d", segs[i], r[0], r[1], end)
			}
			end = r[1]
			dropped++
		}
		if end != want {
			t.Errorf("%s (%d bytes, %d bytes after it): dropped below %d, want %d", segs[i], size, after-size, end, want)
		}
	}
	if keep > 0 && after > keep+2*cachePage*int64(len(segs)) && dropped == 0 {
		t.Errorf("nothing dropped of %d bytes with a tail of %d", after, keep)
	}
}

// TestCacheTailDropsOnlyDurableColdPages: a log that fsyncs its own
// segments drops, after each round, the durable bytes beyond its newest
// CacheTailBytes, across rolls, and never a byte not yet synced.
func TestCacheTailDropsOnlyDurableColdPages(t *testing.T) {
	for _, keep := range []int64{0, 10_000, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			d := newDropFS(t)
			l := mustOpen(t, d, Config{SegmentBytes: 200 << 10, CacheTailBytes: keep})
			var a appended
			for i := range 300 {
				mustAppend(t, l, &a, mkBatch(3, 1000+7*i, int64(i), byte(i)))
				if i%7 == 0 {
					if _, err := l.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if keep == 0 {
				if n := len(d.segmentDrops()); n != 0 {
					t.Fatalf("a log without a cache tail dropped pages of %d segments", n)
				}
				return
			}
			checkDrops(t, d, "/data/t-0", keep)
			if got := readAll(t, l, 1<<20); len(got) != len(a.batches) {
				t.Fatalf("read %d batches back, appended %d", len(got), len(a.batches))
			}
		})
	}
}

// TestCacheTailDropsAtJournalCheckpoints: a journaled log's segments are
// fsynced only by checkpoints, so pages are dropped only there.
func TestCacheTailDropsAtJournalCheckpoints(t *testing.T) {
	d := newDropFS(t)
	j, err := OpenJournal(d, "/data/journal", JournalConfig{CheckpointEvery: time.Hour, CheckpointBytes: 1 << 40}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const keep = 50_000
	l, err := OpenJournaled(d, "/data/wal/t-0", Config{SegmentBytes: 200 << 10, CacheTailBytes: keep}, j, "t-0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	j.Start()
	for i := range 400 {
		mustAppend(t, l, nil, mkBatch(2, 1500, int64(i), byte(i)))
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.segmentDrops()); n != 0 {
		t.Fatalf("pages of %d segments dropped before any checkpoint fsynced them", n)
	}
	if err := j.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	checkDrops(t, d, "/data/wal/t-0", keep)
	for i := range 100 {
		mustAppend(t, l, nil, mkBatch(2, 1500, int64(i), byte(i)))
	}
	if err := j.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	checkDrops(t, d, "/data/wal/t-0", keep)
}
