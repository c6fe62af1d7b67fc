package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// batch makes a valid v2 record batch of n records of size bytes each.
func batch(n, size int, ts int64) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // Length 0 is one varint byte
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{Length: int32(wal.BatchHeaderSize - 12 + len(recs)), Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// testPartition is a leader replica over a real wal.Log whose HW is its
// end: what the manager sees of broker/partition.
type testPartition struct {
	id  [16]byte
	n   int32
	log *wal.Log
}

func (p *testPartition) TopicID() [16]byte { return p.id }
func (p *testPartition) Index() int32      { return p.n }
func (p *testPartition) Log() *wal.Log     { return p.log }
func (p *testPartition) HighWatermark() (wal.Offset, <-chan struct{}) {
	return p.log.EndOffset(), nil
}
func (p *testPartition) DeleteLocalBelow(off wal.Offset) (int, error) { return p.log.DeleteBelow(off) }
func (p *testPartition) ProducerSnapshot() ([]byte, error)            { return []byte(`{"producers":[]}`), nil }

func freeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Must(t)
}

type fixture struct {
	sizes fixtureSizes
	store *meta.Store
	obj   objstore.Store
	m     *Manager
	p     *testPartition
	fence meta.PartitionState
	clock *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixtureSizes are a fixture's segment, chunk and upload sizes.
type fixtureSizes struct{ segment, chunk, upload int64 }

// smallSizes make many small objects of a few chunks each from little data.
var smallSizes = fixtureSizes{segment: 4096, chunk: 1024, upload: 2048}

func newFixture(t *testing.T, obj objstore.Store) *fixture {
	t.Helper()
	return newFixtureSized(t, obj, smallSizes)
}

func newFixtureSized(t testing.TB, obj objstore.Store, sizes fixtureSizes) *fixture {
	t.Helper()
	ctx := t.Context()
	st, err := meta.Open(ctx, meta.Config{DataDir: t.TempDir(), Name: "1", ListenClient: freeAddr(t), ListenPeer: freeAddr(t),
		StartTimeout: 30 * time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, states, err := st.CreateTopicWithPartitions(ctx, meta.Topic{Name: "t", ReplicationFactor: 1}, [][]int32{{1}})
	if err != nil {
		t.Fatal(err)
	}
	fence := states[0]
	fence.Leader, fence.LeaderEpoch = 1, 1
	if fence, err = st.UpdatePartition(ctx, fence); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	l, err := wal.Open(vfs.NewMem(), "log", wal.Config{SegmentBytes: sizes.segment, Now: clk.Now}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := cache.New(cache.Config{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	m, err := New(Config{Store: obj, Index: st, Cache: c, ChunkBytes: int(sizes.chunk), MaxObjectsInHead: 4, MaxManifestsInHead: 4, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{sizes: sizes, store: st, obj: obj, m: m, p: &testPartition{id: fence.TopicID, n: 0, log: l}, fence: fence, clock: clk}
}

func (f *fixture) append(t *testing.T, batches int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range batches {
		n := 1 + (i*7)%9 // batches of different sizes, so some fit a read's budget and some do not
		b := batch(n, 100, f.clock.Now().UnixMilli())
		if _, _, err := f.p.log.Append(b, 1); err != nil {
			t.Fatal(err)
		}
		stored, err := f.p.log.Read(f.p.log.EndOffset()-wal.Offset(n), f.p.log.EndOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stored)
	}
	if _, err := f.p.log.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pass runs one maintenance pass and waits for it.
func (f *fixture) pass(t testing.TB, policy Policy) {
	t.Helper()
	fence := f.fence
	f.m.Maintain(t.Context(), []Target{{P: f.p, Policy: policy, UploadBytes: f.sizes.upload, UploadMaxDelay: time.Hour, Fence: &fence}})
	f.m.Wait()
}

func (f *fixture) readAll(t *testing.T, from wal.Offset, budget int) []byte {
	t.Helper()
	var out []byte
	end := f.p.log.EndOffset()
	local := f.p.log.StartOffset()
	for from < end {
		var data []byte
		var err error
		if from < local {
			data, err = f.m.Read(t.Context(), f.p.id, 0, from, budget)
		} else {
			data, err = f.p.log.Read(from, end, budget)
		}
		if err != nil {
			t.Fatalf("read at %d (local start %d): %v", from, local, err)
		}
		if len(data) == 0 {
			t.Fatalf("empty read at %d", from)
		}
		last := from - 1
		for rest := data; len(rest) > 0; {
			h, err := wal.ParseBatchHeader(rest)
			if err != nil {
				t.Fatal(err)
			}
			if h.LastOffset() <= last || (h.BaseOffset > last+1 && last >= from) || h.BaseOffset > from && last < from {
				t.Fatalf("read at %d (budget %d): batch [%d, %d] after offset %d: a gap or a repeat", from, budget, h.BaseOffset, h.LastOffset(), last)
			}
			last = h.LastOffset()
			rest = rest[h.Size():]
		}
		out = append(out, data...)
		from = last + 1
	}
	return out
}

func TestUploadThenLocalDeletionThenReplay(t *testing.T) {
	f := newFixture(t, mem.New())
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: 0, LocalRetentionBytes: Unlimited, Grace: time.Minute}
	var want []byte
	for round := range 12 {
		for _, b := range f.append(t, 6) {
			want = append(want, b...)
		}
		f.clock.Advance(time.Second)
		f.pass(t, policy)
		f.pass(t, policy)
		if err := f.m.parts[partKey{f.p.id, 0}].lastError; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	h, err := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.RemoteEnd == 0 || len(h.Manifests) == 0 || len(h.Objects) > 4 || len(h.Intents) != 0 {
		t.Fatalf("head after uploads: remote end %d, %d objects, %d manifests, %d intents", h.RemoteEnd, len(h.Objects), len(h.Manifests), len(h.Intents))
	}
	if f.p.log.StartOffset() == 0 {
		t.Fatal("nothing was deleted locally after upload")
	}
	if got := f.p.log.StartOffset(); int64(got) > h.RemoteEnd {
		t.Fatalf("local start %d above the remote end %d: data deleted before it was uploaded", got, h.RemoteEnd)
	}
	for _, budget := range []int{1, 700, 3000, 1 << 20} {
		got := f.readAll(t, 0, budget)
		if !bytes.Equal(got, want) {
			t.Fatalf("replay from 0 with budget %d: %d bytes, want %d identical", budget, len(got), len(want))
		}
	}
	// A timestamp lookup resolves through the footers.
	if b, err := f.m.FindTimestamp(t.Context(), f.p.id, 0, 0); err != nil || b == nil {
		t.Fatalf("FindTimestamp: %v", err)
	}
	t.Logf("remote end %d, local start %d, %d objects in the head, %d manifests, stats %+v", h.RemoteEnd, f.p.log.StartOffset(), len(h.Objects), len(h.Manifests), f.m.Stats())
}

func TestDeposedLeaderCannotCommit(t *testing.T) {
	f := newFixture(t, mem.New())
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited}
	f.append(t, 6)
	f.pass(t, policy)
	h, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if h.RemoteEnd == 0 {
		t.Fatal("first upload did not commit")
	}
	// An election moves the partition to epoch 2; the old fence is stale.
	next := f.fence
	next.LeaderEpoch = 2
	newFence, err := f.store.UpdatePartition(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	f.append(t, 6)
	f.pass(t, policy)
	if err := f.m.parts[partKey{f.p.id, 0}].lastError; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("upload by a deposed leader: %v, want ErrNotLeader", err)
	}
	after, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if after.RemoteEnd != h.RemoteEnd {
		t.Fatalf("a deposed leader moved the remote end from %d to %d", h.RemoteEnd, after.RemoteEnd)
	}
	// The new leader resumes at the remote end: no gap, no overlap.
	f.fence = newFence
	f.pass(t, policy)
	final, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	resumed := false
	for _, o := range final.Objects {
		resumed = resumed || (o.Base == h.RemoteEnd && o.Epoch == 2)
	}
	if final.RemoteEnd <= h.RemoteEnd || !resumed {
		t.Fatalf("the new leader did not resume at %d: %+v", h.RemoteEnd, final.Objects)
	}
	for i := 1; i < len(final.Objects); i++ {
		if final.Objects[i].Base != final.Objects[i-1].Next {
			t.Fatalf("objects not contiguous: %+v", final.Objects)
		}
	}
}

func TestIntentLeftByACrashIsResolved(t *testing.T) {
	f := newFixture(t, mem.New())
	ctx := context.Background()
	// A leader recorded an intent and PUT its object, then crashed.
	h, _ := f.store.RemoteHead(ctx, f.p.id, 0)
	key := objectKey(f.p.id, 0, 0, 1)
	h.Intents = append(h.Intents, meta.RemoteIntent{Key: key, Base: 0, Epoch: 1})
	if _, err := f.store.PutRemoteHead(ctx, h, f.fence); err != nil {
		t.Fatal(err)
	}
	if err := f.obj.Put(ctx, key, []byte("half an upload")); err != nil {
		t.Fatal(err)
	}
	f.append(t, 6)
	f.pass(t, Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited})
	if _, err := f.obj.Head(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the uncommitted object is still there: %v", err)
	}
	after, _ := f.store.RemoteHead(ctx, f.p.id, 0)
	if len(after.Intents) != 0 || after.RemoteEnd == 0 {
		t.Fatalf("head after resolving: %+v", after)
	}
}

func TestKeysParse(t *testing.T) {
	id := uuid.New()
	k := objectKey(id, 7, 1234, 3)
	info, ok := ParseKey(k)
	if !ok || info.TopicID != id || info.Partition != 7 || info.Base != 1234 || info.Epoch != 3 || info.Manifest {
		t.Fatalf("ParseKey(%q) = %+v, %v", k, info, ok)
	}
	mk := manifestKey(id, 7, 99)
	if info, ok := ParseKey(mk); !ok || !info.Manifest || info.Base != 99 {
		t.Fatalf("ParseKey(%q) = %+v, %v", mk, info, ok)
	}
	for _, bad := range []string{"", "x/y", "0000/" + id.String() + "/7/a.obj", "ffff/" + id.String() + "/7/00000000000000001234-3-x.obj"} {
		if _, ok := ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

// Retention passed offsets before they were uploaded: the remote log goes
// on above the gap, older objects with the gap below the log start spill
// into a manifest that still reads, and a replay from the log start is
// exact.
func TestUploadAfterRetentionPassedUnuploadedData(t *testing.T) {
	f := newFixture(t, mem.New())
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited}
	f.append(t, 6)
	f.pass(t, policy) // objects below the end
	h, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	f.append(t, 12)
	// Total retention deleted local data that was not uploaded yet.
	segs := f.p.log.Segments()
	gapTo := segs[len(segs)-3].Next
	if _, err := f.p.log.DeleteBelow(gapTo); err != nil {
		t.Fatal(err)
	}
	if wal.Offset(h.RemoteEnd) >= f.p.log.StartOffset() {
		t.Fatalf("no gap: remote end %d, local start %d", h.RemoteEnd, f.p.log.StartOffset())
	}
	for range 8 {
		f.append(t, 6)
		f.pass(t, policy)
	}
	after, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if after.LogStart != int64(gapTo) || len(after.Manifests) == 0 {
		t.Fatalf("head after the gap: log start %d (want %d), %d manifests", after.LogStart, gapTo, len(after.Manifests))
	}
	objs, _, err := f.m.Objects(t.Context(), f.p.id, 0)
	if err != nil {
		t.Fatalf("objects through the manifests: %v", err)
	}
	if len(objs) < 2 {
		t.Fatalf("objects %+v", objs)
	}
	// Everything in [log start, remote end) read from the objects equals
	// the local log's bytes (local retention kept them here too).
	var got []byte
	for from := wal.Offset(after.LogStart); from < wal.Offset(after.RemoteEnd); {
		data, err := f.m.Read(t.Context(), f.p.id, 0, from, 3000)
		if err != nil || len(data) == 0 {
			t.Fatalf("remote read at %d: %d bytes, %v", from, len(data), err)
		}
		got = append(got, data...)
		for rest := data; len(rest) > 0; {
			bh, _ := wal.ParseBatchHeader(rest)
			from = bh.LastOffset() + 1
			rest = rest[bh.Size():]
		}
	}
	local, err := f.p.log.Read(gapTo, wal.Offset(after.RemoteEnd), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, local) {
		t.Fatalf("remote replay from %d: %d bytes, the local log has %d", after.LogStart, len(got), len(local))
	}
	if _, err := f.m.Read(t.Context(), f.p.id, 0, wal.Offset(h.RemoteEnd), 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read in the gap: %v, want ErrOffsetOutOfRange", err)
	}
}

// Many uploads: the head keeps at most a few objects and manifest
// references, older ones nest into manifests of manifests; everything reads
// back in order, and retention deletes whole subtrees, leaving the bucket
// exactly what the head names (no orphan, nothing missing).
func TestManifestTree(t *testing.T) {
	f := newFixture(t, mem.New())
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: 0, LocalRetentionBytes: Unlimited}
	var want []byte
	for range 40 {
		for _, b := range f.append(t, 3) {
			want = append(want, b...)
		}
		f.pass(t, policy)
	}
	h, err := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	level := 0
	for _, r := range h.Manifests {
		level = max(level, r.Level)
	}
	if len(h.Objects) > 4 || len(h.Manifests) > 4 || level < 2 {
		t.Fatalf("head: %d objects, %d manifest references, deepest level %d", len(h.Objects), len(h.Manifests), level)
	}
	objs, err := ListObjects(t.Context(), f.obj, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(objs); i++ {
		if objs[i].Base != objs[i-1].Next {
			t.Fatalf("objects out of order at %d: %+v then %+v", i, objs[i-1], objs[i])
		}
	}
	if got := f.readAll(t, 0, 2000); !bytes.Equal(got, want) {
		t.Fatalf("replay through the manifest tree: %d bytes, want %d", len(got), len(want))
	}
	// Retention passes half the log; after the grace the objects and the
	// manifests below it go, and the bucket holds exactly what the head names.
	policy.RetentionBytes = int64(len(want) / 2)
	for range 4 {
		f.pass(t, policy)
		f.clock.Advance(time.Minute)
	}
	after, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if after.Clean == 0 || after.Clean != after.LogStart {
		t.Fatalf("clean-up did not finish: clean %d, log start %d", after.Clean, after.LogStart)
	}
	rep, err := Diff(t.Context(), f.obj, fixedHeads(after), DiffConfig{Now: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Orphans) != 0 || len(rep.Missing) != 0 {
		t.Fatalf("after retention: %d orphans (%+v), %d missing (%+v)", len(rep.Orphans), rep.Orphans, len(rep.Missing), rep.Missing)
	}
	got := f.readAll(t, wal.Offset(after.LogStart), 2000)
	if len(got) == 0 || !bytes.HasSuffix(want, got) {
		t.Fatalf("replay from the new log start %d: %d bytes, not the tail of what was written", after.LogStart, len(got))
	}
}

// lateCommit is an object store whose first Delete of key first lets a
// commit land in the index: the commit of an upload whose answer was lost
// (an etcd timeout) while its transaction was still in flight.
type lateCommit struct {
	objstore.Store
	key    string
	commit func()
	once   sync.Once
}

func (l *lateCommit) Delete(ctx context.Context, key string) error {
	if key == l.key {
		l.once.Do(l.commit)
	}
	return l.Store.Delete(ctx, key)
}

// Resolving an intent must never delete an object a commit still in flight
// goes on to name: the head without the intent is written first, so such a
// commit fails, and only then is the object deleted. (Deleting first left
// the index naming a missing object: chaos all-crash, a 404 on re-read.)
func TestIntentResolvedBeforeALateCommitLands(t *testing.T) {
	obj := &lateCommit{Store: mem.New()}
	f := newFixture(t, obj)
	ctx := context.Background()
	h, _ := f.store.RemoteHead(ctx, f.p.id, 0)
	key := objectKey(f.p.id, 0, 0, 1)
	h.Intents = append(h.Intents, meta.RemoteIntent{Key: key, Base: 0, Epoch: 1})
	h, err := f.store.PutRemoteHead(ctx, h, f.fence)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.obj.Put(ctx, key, []byte("an upload whose commit answer was lost")); err != nil {
		t.Fatal(err)
	}
	obj.key = key
	landed := false
	obj.commit = func() {
		late := h
		late.Intents = nil
		late.Objects = append(slices.Clone(h.Objects), meta.RemoteObject{Key: key, Base: 0, Next: 6, Size: 38, Epoch: 1})
		late.RemoteEnd = 6
		_, err := f.store.PutRemoteHead(ctx, late, f.fence)
		landed = err == nil
	}
	f.append(t, 6)
	f.pass(t, Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited})
	after, _ := f.store.RemoteHead(ctx, f.p.id, 0)
	if landed {
		t.Fatalf("a commit conditioned on the head the intent was read from landed after the intent was resolved")
	}
	for _, o := range after.Objects {
		if _, err := f.obj.Head(ctx, o.Key); err != nil {
			t.Fatalf("the head names %s, which the store lacks: %v", o.Key, err)
		}
	}
	if len(after.Intents) != 0 {
		t.Fatalf("intents left: %+v", after.Intents)
	}
}
