package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

type snapshotFixture struct {
	t    *testing.T
	dir  string
	now  time.Time
	cfg  wal.Config
	fs   vfs.FS // the partition's file system; vfs.OS unless a test injects faults
	part *Partition
}

// keepBytes is how much of the log the fixture's retention keeps
// (belowKeeping): two segments.
const keepBytes = 2048

func newSnapshotFixture(t *testing.T) *snapshotFixture {
	f := &snapshotFixture{t: t, dir: t.TempDir(), now: time.UnixMilli(1_000_000),
		cfg: wal.Config{SegmentBytes: 1024}.WithDefaults(), fs: vfs.OS}
	f.open()
	return f
}

func (f *snapshotFixture) open() {
	f.t.Helper()
	l, err := wal.Open(f.fs, filepath.Join(f.dir, "log"), f.cfg, zerolog.Nop())
	if err != nil {
		f.t.Fatal(err)
	}
	p, err := Open(l, Options{
		Topic: "t", Queue: 16, FS: f.fs, SnapshotPath: filepath.Join(f.dir, "p.producers"),
		ProducerExpiry: time.Hour, Now: func() time.Time { return f.now }, Logger: zerolog.Nop(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.part = p
}

func (f *snapshotFixture) close() {
	f.t.Helper()
	if err := f.part.log.Close(); err != nil {
		f.t.Fatal(err)
	}
}

// append runs one group commit of raw and returns its result.
func (f *snapshotFixture) append(raw []byte) AppendResult {
	f.t.Helper()
	return f.appendWithin(raw, 30*time.Second)
}

// belowKeeping returns the offset below which whole sealed segments go so
// that the newest keepBytes of the log stay: the decision size-based
// retention (tier's state machine) makes.
func belowKeeping(segs []wal.SegmentInfo, keepBytes int64) wal.Offset {
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	below := wal.Offset(0)
	for _, s := range segs[:len(segs)-1] {
		if total <= keepBytes {
			break
		}
		total -= s.Size
		below = s.Next
	}
	return below
}

// deleteLocalBelow runs Partition.DeleteLocalBelow, doing the owner
// goroutine's part itself: the fixture runs no Run loop.
func (f *snapshotFixture) deleteLocalBelow(off wal.Offset) (int, error) {
	f.t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := f.part.DeleteLocalBelow(off)
		done <- result{n, err}
	}()
	(<-f.part.ctl)()
	r := <-done
	return r.n, r.err
}

// pushOutOldSegments appends plain batches and deletes the oldest segments
// beyond keepBytes with del until the log start has passed offset.
func (f *snapshotFixture) pushOutOldSegments(offset wal.Offset, del func(wal.Offset) (int, error)) {
	f.t.Helper()
	for i := 0; f.part.log.StartOffset() <= offset; i++ {
		if i > 1000 {
			f.t.Fatalf("log start stuck at %d", f.part.log.StartOffset())
		}
		if res := f.append(testBatch(4, -1, -1, -1, 5)); res.Err != nil {
			f.t.Fatal(res.Err)
		}
		if _, err := del(belowKeeping(f.part.log.Segments(), keepBytes)); err != nil {
			f.t.Fatal(err)
		}
	}
}

func TestProducerStateSurvivesRetentionAndRestart(t *testing.T) {
	f := newSnapshotFixture(t)
	first := f.append(testBatch(2, 7, 0, 0, 1))
	second := f.append(testBatch(2, 7, 0, 2, 1))
	if first.Err != nil || second.Err != nil {
		t.Fatal(first.Err, second.Err)
	}
	// DeleteLocalBelow writes the snapshot before it deletes: the last one
	// it wrote covers every deleted batch of producer 7, and the restart
	// reads that one (nothing writes a snapshot after it).
	f.pushOutOldSegments(second.Base, f.deleteLocalBelow)
	f.close()

	f.open()
	retry := f.append(testBatch(2, 7, 0, 2, 1))
	if retry.Err != nil || !retry.Dup || retry.Base != second.Base {
		t.Fatalf("retry after restart: %+v, want duplicate of offset %d", retry, second.Base)
	}
	if gap := f.append(testBatch(1, 7, 0, 9, 1)); gap.Err == nil {
		t.Fatal("a sequence gap after restart was accepted")
	}
}

func TestProducerStateWithoutSnapshotIsLostWithItsSegments(t *testing.T) {
	// The control for the test above: without a snapshot, retention takes
	// the deduplication window with it.
	f := newSnapshotFixture(t)
	second := f.append(testBatch(2, 7, 0, 0, 1))
	f.pushOutOldSegments(second.Base, f.part.log.DeleteBelow) // the log alone: no snapshot
	f.close()
	f.open()
	if retry := f.append(testBatch(2, 7, 0, 0, 1)); retry.Dup {
		t.Fatal("state survived without a snapshot: the snapshot test proves nothing")
	}
}

func TestProducerExpiry(t *testing.T) {
	f := newSnapshotFixture(t)
	f.append(testBatch(1, 7, 0, 0, 1))
	f.now = f.now.Add(30 * time.Minute)
	f.append(testBatch(1, 8, 0, 0, 1))
	f.now = f.now.Add(45 * time.Minute) // 7 idle 75 min, 8 idle 45 min
	f.part.expireProducers()
	if _, ok := f.part.producers[7]; ok {
		t.Fatal("producer 7 outlived its expiry")
	}
	if _, ok := f.part.producers[8]; !ok {
		t.Fatal("producer 8 expired early")
	}
}

func TestCorruptSnapshotIsIgnored(t *testing.T) {
	f := newSnapshotFixture(t)
	res := f.append(testBatch(2, 7, 0, 0, 1))
	if err := f.part.writeSnapshot(); err != nil {
		t.Fatal(err)
	}
	f.close()
	path := filepath.Join(f.dir, "p.producers")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[10] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.open()
	// The log still holds the batch, so replay restores the state.
	if retry := f.append(testBatch(2, 7, 0, 0, 1)); !retry.Dup || retry.Base != res.Base {
		t.Fatalf("retry: %+v", retry)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte("{\"version\":1,\"offset\":3,\"producers\":[]}\n00000000\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := decodeSnapshot(data)
		if err == nil && (snap.Version != snapshotVersion || snap.Offset < 0) {
			t.Fatalf("accepted %+v", snap)
		}
	})
}
