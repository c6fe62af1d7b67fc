package partition

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
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
	recvWithin(f.t, f.part.ctl, "DeleteLocalBelow to hand its work to the owner")()
	r := recvWithin(f.t, done, "DeleteLocalBelow to return")
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

// stampBatch sets the base offset and leader epoch a leader writes into a
// batch's header (outside its CRC), as a follower receives it.
func stampBatch(raw []byte, base wal.Offset, epoch wal.Epoch) []byte {
	raw = append([]byte(nil), raw...)
	binary.BigEndian.PutUint64(raw[0:], uint64(base))
	binary.BigEndian.PutUint32(raw[12:], uint32(epoch))
	return raw
}

// truncationFixture drives one partition (node 1 of replicas 1, 2, 3) on
// an in-memory disk through elections and replica fetches, doing the owner
// goroutine's part itself as the snapshot fixture does.
type truncationFixture struct {
	t    *testing.T
	fs   *vfs.Mem
	part *Partition
	log  zerolog.Logger // the log's and the partition's; zero value: none
}

func (f *truncationFixture) open() {
	f.t.Helper()
	l, err := wal.Open(f.fs, "log", wal.Config{}.WithDefaults(), f.log)
	if err != nil {
		f.t.Fatal(err)
	}
	p, err := Open(l, Options{Topic: "t", Self: 1, Queue: 16, FS: f.fs, SnapshotPath: "p.producers",
		ProducerExpiry: time.Hour, Now: func() time.Time { return time.UnixMilli(1_000_000) },
		Logger: f.log, Net: quietNet{}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.part = p
}

// elect fences node 1 at epoch e and names leader, as the controller does.
func (f *truncationFixture) elect(e wal.Epoch, leader replica.NodeID) {
	f.t.Helper()
	f.part.rep.Step(replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 1, Epoch: e})
	f.part.handleReady()
	f.part.rep.SetState(replica.State{Epoch: e, Leader: leader, Replicas: []replica.NodeID{1, 2, 3}, Version: int64(e)})
	f.part.handleReady()
	if st := f.part.ReplicaStatus(); st.Epoch != e || st.Leader != leader {
		f.t.Fatalf("after the election of epoch %d: %+v", e, st)
	}
}

// answerFetch answers the fetch the follower core sent with resp (its
// echo fields filled in from the fetch).
func (f *truncationFixture) answerFetch(resp replica.Message) {
	f.t.Helper()
	m, ok := f.part.TakeFetch()
	if !ok {
		f.t.Fatal("the follower sent no fetch")
	}
	resp.Type, resp.From, resp.To = replica.MsgFetchResp, m.To, m.From
	resp.Epoch, resp.Seq, resp.Offset, resp.LastEpoch = m.Epoch, m.Seq, m.Offset, m.LastEpoch
	f.part.rep.Step(resp)
	f.part.handleReady()
}

// TestTruncationBelowTheSnapshotSurvivesACrash: a follower truncates an
// idempotent batch that its producer snapshot covers, copies the leader's
// log (another producer's batches) past the snapshot's offset and crashes.
// After the restart the truncated batch's retry must be appended, not
// answered as a duplicate at an offset holding other records, and the
// other producer's retry must be a duplicate, not appended twice.
func TestTruncationBelowTheSnapshotSurvivesACrash(t *testing.T) {
	f := &truncationFixture{t: t, fs: vfs.NewMem()}
	f.open()
	f.elect(1, 1)
	a := appendOn(t, f.part, testBatch(1, 7, 0, 0, 1)) // offset 0, the leaders agree on it
	b := appendOn(t, f.part, testBatch(3, 7, 0, 1, 1)) // offsets 1-3, never replicated
	if a.Err != nil || b.Err != nil || b.Base != 1 {
		t.Fatalf("appends: %+v %+v", a, b)
	}
	if err := f.part.writeSnapshot(); err != nil { // as Maintain does: covers [0, 4)
		t.Fatal(err)
	}

	// Node 2 leads epoch 2 with offset 0, its epoch-start batch at 1, then
	// producer 8's batch at 2-3 and producer 9's at 4.
	f.elect(2, 2)
	f.answerFetch(replica.Message{Diverging: true, DivergingEpoch: 1, DivergingEnd: 1})
	if end := f.part.log.EndOffset(); end != 1 {
		t.Fatalf("log end %d after the divergence, want 1", end)
	}
	leaderLog := []replica.Batch{
		{Base: 1, Last: 1, Epoch: 2, Control: true, Data: stampBatch(encodeEpochStartBatch(1), 1, 2)},
		{Base: 2, Last: 3, Epoch: 2, Data: stampBatch(testBatch(2, 8, 0, 0, 1), 2, 2)},
		{Base: 4, Last: 4, Epoch: 2, Data: stampBatch(testBatch(1, 9, 0, 0, 1), 4, 2)},
	}
	f.answerFetch(replica.Message{ReadFrom: 1, ReadTo: 5, HW: 5, Batches: leaderLog})
	if end := f.part.log.EndOffset(); end != 5 {
		t.Fatalf("log end %d after copying the leader's, want 5", end)
	}

	// A crash: only what was synced survives. Node 1 then leads epoch 3.
	f.fs = f.fs.CrashClone()
	f.open()
	f.elect(3, 1)
	retry := appendOn(t, f.part, testBatch(3, 7, 0, 1, 1))
	if retry.Err != nil || retry.Dup {
		t.Fatalf("retry of the truncated batch: %+v, want it appended (offsets 1-3 hold other records)", retry)
	}
	other := appendOn(t, f.part, testBatch(2, 8, 0, 0, 1))
	if other.Err != nil || !other.Dup || other.Base != 2 {
		t.Fatalf("retry of producer 8's batch: %+v, want a duplicate of offset 2", other)
	}
}

// appendOn runs one group commit of raw on p, doing the owner's part.
func appendOn(t *testing.T, p *Partition, raw []byte) AppendResult {
	t.Helper()
	return appendRequestOn(t, p, newTestAppend(t, raw))
}

// TestUnchangedSnapshotIsNotRewritten: an idle partition's maintenance
// passes do not write its producer snapshot again (each write is a file,
// an fsync and a rename: at the default 30 s interval, 17 fsyncs a second
// for 500 idle partitions); a changed producer state still is written, and
// after a failed write the next pass writes again.
func TestUnchangedSnapshotIsNotRewritten(t *testing.T) {
	var renames atomic.Int64
	failing := &armedFaults{op: vfs.OpRename, path: ".producers"}
	f := newSnapshotFixture(t)
	f.fs = vfs.NewFaulty(vfs.OS, func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.HasSuffix(path, ".producers.tmp") {
			if err := failing.inject(op, path); err != nil {
				return err
			}
			renames.Add(1)
		}
		return nil
	})
	f.close()
	f.open()
	if res := f.append(testBatch(2, 7, 0, 0, 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	write := func(want int64, why string) {
		t.Helper()
		if err := f.part.writeSnapshot(); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		if got := renames.Load(); got != want {
			t.Fatalf("%s: %d snapshot files written, want %d", why, got, want)
		}
	}
	write(1, "the first snapshot")
	write(1, "the same state again")
	write(1, "and again")
	if res := f.append(testBatch(2, 7, 0, 2, 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	write(2, "after the producer's next batch")
	if res := f.append(testBatch(2, 7, 0, 4, 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	failing.armed.Store(true)
	if err := f.part.writeSnapshot(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("a failing write: %v", err)
	}
	failing.armed.Store(false)
	write(3, "the state whose write failed, again")
	write(3, "and then unchanged")
	// A restart reads what was written last.
	f.close()
	f.fs = vfs.OS
	f.open()
	if next := f.append(testBatch(1, 7, 0, 6, 1)); next.Err != nil {
		t.Fatalf("the producer's next batch after restart: %v", next.Err)
	}
}
