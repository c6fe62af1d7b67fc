package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/cmd/internal/cli/clitest"
	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/file"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// etcdURL is the client URL of the embedded etcd every test shares; each
// test keeps its keys under its own prefix.
var etcdURL string

func freeAddr() (string, error) {
	return freeport.Addr()
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "tierctl-etcd-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer os.RemoveAll(dir)
		client, err1 := freeAddr()
		peer, err2 := freeAddr()
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, err1, err2)
			return 2
		}
		st, err := meta.Open(context.Background(), meta.Config{DataDir: dir, Name: "1", ListenClient: client, ListenPeer: peer,
			StartTimeout: 60 * time.Second}, zerolog.Nop())
		if err != nil {
			fmt.Fprintln(os.Stderr, "embedded etcd:", err)
			return 2
		}
		defer st.Close()
		etcdURL = "http://" + client
		return m.Run()
	}())
}

// t0 is the timestamp of offset 0; offset o is t0 + o seconds.
const t0 = int64(1_700_000_000_000)

// rec is the record the fixture writes at offset off.
func rec(off int) kmsg.Record {
	r := kmsg.Record{Key: fmt.Appendf(nil, "k%d", off), Value: fmt.Appendf(nil, "v%d", off),
		Headers: []kmsg.Header{{Key: "h", Value: fmt.Appendf(nil, "x%d", off)}}}
	switch off {
	case 3:
		r.Key = nil
	case 7:
		r.Value = []byte{0xff, 0xfe}
	}
	return r
}

// makeBatch is a valid stamped batch of records [base, base+n) at epoch,
// its records compressed with codec (0 none, 3 lz4, 4 zstd).
func makeBatch(t *testing.T, base, n int, epoch int32, codec int16) []byte {
	t.Helper()
	var recs []byte
	for i := range n {
		r := rec(base + i)
		r.OffsetDelta, r.TimestampDelta64 = int32(i), int64(i)*1000
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	switch codec {
	case 3:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(recs); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		recs = buf.Bytes()
	case 4:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		recs = enc.EncodeAll(recs, nil)
		enc.Close()
	}
	ts := t0 + int64(base)*1000
	rb := kmsg.RecordBatch{FirstOffset: int64(base), PartitionLeaderEpoch: epoch, Length: int32(wal.BatchHeaderSize - 12 + len(recs)),
		Magic: 2, Attributes: codec, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1)*1000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// keyPrefix is tier/keys.go's partitionPrefix, which tier does not export.
func keyPrefix(id [16]byte, n int32) string {
	h := fnv.New32a()
	h.Write(id[:])
	fmt.Fprintf(h, "/%d", n)
	return fmt.Sprintf("%04x/%s/%d/", h.Sum32()&0xffff, uuid.UUID(id), n)
}

func objKey(id [16]byte, n int32, base int64, epoch int32) string {
	return fmt.Sprintf("%s%020d-%d-%s.obj", keyPrefix(id, n), base, epoch, uuid.New())
}

// fixture is topic "orders" with one partition of offsets [0, 100) in
// batches of 5 (epoch 1 below 50, epoch 2 from it; [10, 15) zstd and
// [85, 90) lz4): objects [0, 30) (in a manifest), [30, 60), [60, 80) in a
// file store at <data-dir>/objects, and a local log of all of it in
// <data-dir>/wal.
type fixture struct {
	prefix  string
	meta    *meta.Store
	dataDir string
	store   objstore.Store
	topic   meta.Topic
	head    meta.RemoteHead
	objs    []meta.RemoteObject
	walDir  string
}

var epochs = []wal.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 50}}

func batchAt(t *testing.T, base int) []byte {
	epoch, codec := int32(1), int16(0)
	if base >= 50 {
		epoch = 2
	}
	switch base {
	case 10:
		codec = 4
	case 85:
		codec = 3
	}
	return makeBatch(t, base, 5, epoch, codec)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/", dataDir: t.TempDir()}
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{etcdURL}, Prefix: f.prefix}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.meta = st
	topic, states, err := st.CreateTopicWithPartitions(ctx, meta.Topic{Name: "orders", ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "3600000"}}, [][]int32{{1}})
	if err != nil {
		t.Fatal(err)
	}
	f.topic = topic
	fence := states[0]
	fence.Leader, fence.LeaderEpoch = 1, 2
	if fence, err = st.UpdatePartition(ctx, fence); err != nil {
		t.Fatal(err)
	}
	if f.store, err = file.New(filepath.Join(f.dataDir, "objects")); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 30}, {30, 60}, {60, 80}} {
		f.objs = append(f.objs, f.putObject(t, r[0], r[1]))
	}
	mkey := fmt.Sprintf("%smanifest-%020d-%s.json", keyPrefix(topic.ID, 0), 0, uuid.New())
	body, err := json.Marshal(map[string]any{"v": 1, "objects": f.objs[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Put(ctx, mkey, body); err != nil {
		t.Fatal(err)
	}
	h := meta.RemoteHead{TopicID: topic.ID, Partition: 0, RemoteEnd: 80, Epochs: []meta.RemoteEpoch{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 50}},
		Manifests: []meta.ManifestRef{{Key: mkey, Base: 0, Next: 30, Objects: 1, MaxTs: f.objs[0].MaxTs}}, Objects: f.objs[1:]}
	if f.head, err = st.PutRemoteHead(ctx, h, fence); err != nil {
		t.Fatal(err)
	}
	f.walDir = filepath.Join(f.dataDir, "wal", uuid.UUID(topic.ID).String(), "0")
	l, err := wal.Open(vfs.OS, f.walDir, wal.Config{SegmentBytes: 1500}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for base := 0; base < 100; base += 5 {
		if _, _, err := l.AppendStamped(batchAt(t, base)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) putObject(t *testing.T, base, next int) meta.RemoteObject {
	t.Helper()
	b, err := object.NewBuilder(object.BuilderConfig{TopicID: f.topic.ID, Partition: 0, TargetChunkBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	for off := base; off < next; off += 5 {
		if err := b.Add(batchAt(t, off)); err != nil {
			t.Fatal(err)
		}
	}
	body, footer, err := b.Finish(epochs, []byte(`{"producers":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := footer.EpochFor(wal.Offset(base))
	key := objKey(f.topic.ID, 0, int64(base), int32(e))
	if err := f.store.Put(t.Context(), key, body); err != nil {
		t.Fatal(err)
	}
	return meta.RemoteObject{Key: key, Base: int64(base), Next: int64(next), Size: int64(len(body)), MaxTs: footer.MaxTimestamp(), Epoch: int32(e)}
}

// run runs tierctl with the fixture's connection flags first.
func (f *fixture) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"--etcd-endpoints", etcdURL, "--prefix", f.prefix,
		"--object-store", "file://" + filepath.Join(f.dataDir, "objects")}, args...)
	code = run(t.Context(), all, &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun runs tierctl and fails unless it exits with want.
func (f *fixture) mustRun(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errs := f.run(t, args...)
	if code != want {
		t.Fatalf("tierctl %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errs)
	}
	return out
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
}

// flipByte inverts one byte of a file.
func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUsageAndExitStatus(t *testing.T) {
	var out, errb bytes.Buffer
	ctx := t.Context()
	tests := []struct {
		args []string
		want int
		says string
	}{
		{nil, 2, "usage: tierctl"},
		{[]string{"help"}, 0, "commands:"},
		{[]string{"--help"}, 0, "usage: tierctl"},
		{[]string{"dump", "--help"}, 0, "-offset offset"},
		{[]string{"help", "export"}, 0, "-format"},
		{[]string{"bogus"}, 2, "unknown command"},
		{[]string{"ls"}, 2, "--etcd-endpoints is required"},
		{[]string{"dump", "orders/0", "--etcd-endpoints", etcdURL}, 2, "--offset is required"},
		{[]string{"export", "orders/0", "--etcd-endpoints", etcdURL, "--out", "x", "--format", "csv"}, 2, "want arrow or parquet"},
		{[]string{"--version"}, 0, "tierctl "},
		{[]string{"ls", "--etcd-endpoints", "http://127.0.0.1:1", "--timeout", "200ms", "--object-store", "mem://"}, 2, "connect to etcd"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out.Reset()
			errb.Reset()
			if code := run(ctx, tc.args, &out, &errb); code != tc.want || !strings.Contains(out.String()+errb.String(), tc.says) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.want, tc.says, out.String(), errb.String())
			}
		})
	}
}

// TestHelpConventions: help of every kind on stdout with exit 0, mistakes
// on stderr with exit 2 (cmd/internal/cli); etcd is never asked.
func TestHelpConventions(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(t.Context(), args, stdout, stderr)
	}
	// Every command of the table answers each form of help with its own
	// usage, and the top-level usage lists it.
	var tree []clitest.Help
	for _, c := range commands {
		tree = append(tree, clitest.HelpForms([]string{c.name}, "usage: tierctl "+c.name+" ")...)
		tree = append(tree, clitest.Help{Args: []string{"--help"}, Want: c.summary})
	}
	clitest.Check(t, run, append(tree, []clitest.Help{
		{Args: []string{"--help"}, Want: "usage: tierctl [global flags] command"},
		{Args: []string{"-h"}, Want: "usage: tierctl [global flags] command"},
		{Args: []string{"help"}, Want: "usage: tierctl [global flags] command"},
		{Args: []string{"ls", "--help"}, Want: "usage: tierctl ls"},
		{Args: []string{"ls", "-h"}, Want: "usage: tierctl ls"},
		{Args: []string{"help", "ls"}, Want: "usage: tierctl ls"},
		{Args: []string{"help", "export"}, Want: "-format"},
	}...), []clitest.Mistake{
		{Args: []string{"--no-such-flag"}, Want: "flag provided but not defined: -no-such-flag"},
		{Args: []string{"bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"help", "bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"ls", "--bogus"}, Want: "flag provided but not defined: -bogus"},
		// A stray argument is refused before etcd or the store is asked.
		{Args: []string{"ls", "orders/0", "extra"}, Want: "want at most one topic[/partition], got [orders/0 extra]"},
		{Args: []string{"stat", "a", "b"}, Want: "want at most one topic[/partition], got [a b]"},
		{Args: []string{"verify", "a", "b"}, Want: "want at most one topic[/partition], got [a b]"},
		{Args: []string{"retention", "a", "b"}, Want: "want at most one topic[/partition], got [a b]"},
		{Args: []string{"diff", "orders"}, Want: "diff takes no arguments"},
		{Args: []string{"objects", "orders"}, Want: "objects takes no arguments"},
		{Args: []string{"dump", "orders/0", "extra", "--offset", "0"}, Want: "want one topic/partition, got 2 arguments"},
		{Args: []string{"dump", "--offset", "0"}, Want: "want one topic/partition, got 0 arguments"},
		{Args: []string{"export", "orders/0", "extra", "--out", "x.parquet"}, Want: "want one topic/partition, got 2 arguments"},
		{Args: []string{"export", "orders", "--out", "x.parquet"}, Want: `"orders": want topic/partition`},
	})
}

func TestLsAndStat(t *testing.T) {
	f := newFixture(t)
	out := f.mustRun(t, 0, "ls", "orders/0", "--data-dir", f.dataDir)
	for _, want := range []string{f.objs[0].Key, f.objs[2].Key, "committed", "uploaded", "active", "remote end 80"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ls output lacks %q:\n%s", want, out)
		}
	}
	var ls struct{ Partitions []lsPartition }
	decodeJSON(t, f.mustRun(t, 0, "ls", "--json", "--data-dir", f.dataDir), &ls)
	p := ls.Partitions[0]
	if len(ls.Partitions) != 1 || len(p.Remote) != 3 || len(p.Local) < 3 || p.Local[len(p.Local)-1].Next != 100 {
		t.Fatalf("ls --json: %+v", ls)
	}
	for _, s := range p.Local {
		if s.Uploaded != (s.Next <= 80) {
			t.Fatalf("segment [%d, %d) uploaded=%v with the remote end at 80", s.Base, s.Next, s.Uploaded)
		}
	}

	var st struct{ Partitions []statPartition }
	decodeJSON(t, f.mustRun(t, 0, "stat", "orders", "--json", "--data-dir", f.dataDir), &st)
	s := st.Partitions[0]
	if s.Objects != 3 || s.Manifests != 1 || s.RemoteEnd != 80 || *s.LocalEnd != 100 || s.HeadBytes == 0 ||
		s.RemoteBytes != f.objs[0].Size+f.objs[1].Size+f.objs[2].Size {
		t.Fatalf("stat --json: %+v", s)
	}
	if out := f.mustRun(t, 0, "stat"); !strings.Contains(out, "orders/0") || !strings.Contains(out, "HEAD BYTES") {
		t.Fatalf("stat:\n%s", out)
	}
	if code, _, errs := f.run(t, "ls", "nosuch"); code != 2 || !strings.Contains(errs, `no topic "nosuch"`) {
		t.Fatalf("ls of a missing topic: %d %s", code, errs)
	}
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	out := f.mustRun(t, 0, "verify", "--data-dir", f.dataDir)
	if !strings.Contains(out, "verified 1 partitions, 3 objects, 20 local batches: 0 problems") {
		t.Fatalf("verify of good data:\n%s", out)
	}
	// One byte of the second object's first chunk.
	flipByte(t, filepath.Join(f.dataDir, "objects", filepath.FromSlash(f.objs[1].Key)), 70)
	out = f.mustRun(t, 1, "verify", "orders/0")
	if !strings.Contains(out, f.objs[1].Key) || !strings.Contains(out, "crc") {
		t.Fatalf("verify of a corrupt object:\n%s", out)
	}
	var res verifyResult
	decodeJSON(t, f.mustRun(t, 1, "verify", "--json"), &res)
	if len(res.Problems) != 1 || res.Problems[0].Where != f.objs[1].Key {
		t.Fatalf("verify --json: %+v", res)
	}
	// A manifest missing: its partition cannot be listed.
	if err := f.store.Delete(t.Context(), f.head.Manifests[0].Key); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, f.mustRun(t, 1, "verify", "--json"), &res)
	if len(res.Problems) != 1 || res.Problems[0].Where != "head" || !strings.Contains(res.Problems[0].Problem, "list objects") {
		t.Fatalf("verify with a manifest missing: %+v", res)
	}
}

func TestVerifyLocal(t *testing.T) {
	f := newFixture(t)
	// A record byte of the first (sealed, indexed) segment: its batch CRC
	// fails; opening the log trusts the index and does not notice.
	flipByte(t, filepath.Join(f.walDir, fmt.Sprintf("%020d.log", 0)), 100)
	before, err := os.ReadFile(filepath.Join(f.walDir, fmt.Sprintf("%020d.log", 0)))
	if err != nil {
		t.Fatal(err)
	}
	out := f.mustRun(t, 1, "verify", "orders/0", "--data-dir", f.dataDir)
	if !strings.Contains(out, "local: batch at 0") {
		t.Fatalf("verify of a corrupt local batch:\n%s", out)
	}
	after, err := os.ReadFile(filepath.Join(f.walDir, fmt.Sprintf("%020d.log", 0)))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("verify changed the segment: %v", err)
	}
}

func TestVerifyLocalTornTailIsNotRepairedOnDisk(t *testing.T) {
	f := newFixture(t)
	names, err := os.ReadDir(f.walDir)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".log") {
			last = filepath.Join(f.walDir, n.Name())
		}
	}
	fh, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write([]byte{0, 0, 0, 0, 0, 0, 0, 100, 0, 0}); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	out := f.mustRun(t, 1, "verify", "--data-dir", f.dataDir)
	if !strings.Contains(out, "recovery would change") || !strings.Contains(out, "cut at byte") {
		t.Fatalf("verify of a torn tail:\n%s", out)
	}
	if fi2, err := os.Stat(last); err != nil || fi2.Size() != fi.Size() {
		t.Fatalf("the torn tail was cut on disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.walDir, fmt.Sprintf("%020d.index", 0))); err != nil {
		t.Fatalf("index files: %v", err)
	}
}

func TestDiff(t *testing.T) {
	f := newFixture(t)
	out := f.mustRun(t, 0, "diff")
	if !strings.Contains(out, "bucket: 4 keys, 4 named by 1 heads") {
		t.Fatalf("diff of a clean bucket:\n%s", out)
	}
	// An orphan (a copy of an object under a fresh key), a missing object
	// and a key that is not ours.
	body, err := f.store.Get(t.Context(), f.objs[1].Key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	orphan := objKey(f.topic.ID, 0, 30, 1)
	if err := f.store.Put(t.Context(), orphan, body); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Put(t.Context(), "notes/README", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(t.Context(), f.objs[2].Key); err != nil {
		t.Fatal(err)
	}
	out = f.mustRun(t, 1, "diff")
	for _, want := range []string{"orphans: 1 (0 older than the grace of 10m0s)", orphan, "young: kept", "missing: 1", f.objs[2].Key, "[60, 80)", "notes/README"} {
		if !strings.Contains(out, want) {
			t.Fatalf("diff lacks %q:\n%s", want, out)
		}
	}
	var d diffOutput
	decodeJSON(t, f.mustRun(t, 1, "diff", "--json", "--delete-orphans", "--now", "2100-01-01T00:00:00Z"), &d)
	if d.Deleted != 1 || len(d.Orphans) != 1 || !d.Orphans[0].Removable || len(d.Missing) != 1 || len(d.Foreign) != 1 {
		t.Fatalf("diff --delete-orphans: %+v", d)
	}
	if _, err := f.store.Head(t.Context(), orphan); err == nil {
		t.Fatal("the orphan is still in the bucket")
	}
	if _, err := f.store.Head(t.Context(), "notes/README"); err != nil {
		t.Fatalf("the foreign key was touched: %v", err)
	}
	out = f.mustRun(t, 1, "diff")
	if !strings.Contains(out, "orphans: 0") {
		t.Fatalf("after the scrub:\n%s", out)
	}
}

func TestDiffRefusesToScrubWithoutHeads(t *testing.T) {
	f := newFixture(t)
	if err := f.store.Put(t.Context(), objKey(f.topic.ID, 0, 80, 2), []byte("x")); err != nil {
		t.Fatal(err)
	}
	code, _, errs := f.run(t, "diff", "--prefix", "/wrong/", "--delete-orphans", "--now", "2100-01-01T00:00:00Z")
	if code != 2 || !strings.Contains(errs, "holds no head") {
		t.Fatalf("diff with a wrong prefix: exit %d: %s", code, errs)
	}
	if _, err := f.store.Head(t.Context(), f.objs[1].Key); err != nil {
		t.Fatalf("an object was deleted: %v", err)
	}
}

func TestDump(t *testing.T) {
	f := newFixture(t)
	// Without --data-dir every record comes from the objects.
	out := f.mustRun(t, 0, "dump", "orders/0", "--offset", "3", "--count", "13")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 13 {
		t.Fatalf("dump of 13 records:\n%s", out)
	}
	for i, want := range []string{
		`offset=3 timestamp=2023-11-14T22:13:23.000Z key=null value="v3" headers=["h"="x3"]`,
		`offset=4 timestamp=2023-11-14T22:13:24.000Z key="k4" value="v4" headers=["h"="x4"]`,
	} {
		if lines[i] != want {
			t.Fatalf("line %d:\n got %s\nwant %s", i, lines[i], want)
		}
	}
	if !strings.HasPrefix(lines[4], `offset=7 `) || !strings.Contains(lines[4], "value=base64://4=") {
		t.Fatalf("a value that is not UTF-8: %s", lines[4])
	}
	if !strings.HasPrefix(lines[12], `offset=15 `) || !strings.Contains(lines[9], `value="v12"`) {
		t.Fatalf("records across the zstd batch: %s / %s", lines[9], lines[12])
	}

	// With --data-dir, from the local log (lz4 at 85) to its end.
	var d struct {
		Records []struct {
			Offset    int64
			Timestamp int64
			Key       string
			Value     string
			Headers   []struct{ Key, Value string }
		}
	}
	decodeJSON(t, f.mustRun(t, 0, "dump", "orders/0", "--offset", "84", "--count", "100", "--json", "--data-dir", f.dataDir), &d)
	if len(d.Records) != 16 || d.Records[0].Offset != 84 || d.Records[15].Offset != 99 || d.Records[2].Value != "v86" ||
		d.Records[2].Timestamp != t0+86_000 || d.Records[2].Headers[0].Value != "x86" {
		t.Fatalf("dump --json from the local log: %+v", d.Records)
	}
	if code, _, errs := f.run(t, "dump", "orders/0", "--offset", "90"); code != 2 ||
		!strings.Contains(errs, "is at or past the end 80") {
		t.Fatalf("dump past the remote end without the local log: %d %s", code, errs)
	}
}

func TestRetention(t *testing.T) {
	f := newFixture(t)
	// Ten days after the data: everything is past retention.ms (1 h).
	now := time.UnixMilli(t0).Add(240 * time.Hour).UTC().Format(time.RFC3339)
	out := f.mustRun(t, 0, "retention", "orders/0", "--now", now, "--data-dir", f.dataDir)
	for _, want := range []string{"local: delete the segments below", "past retention.ms=3600000", "log start: 0 -> 80",
		f.objs[0].Key, "clean-up: a grace period starts"} {
		if !strings.Contains(out, want) {
			t.Fatalf("retention lacks %q:\n%s", want, out)
		}
	}
	var r struct{ Partitions []retentionPlan }
	decodeJSON(t, f.mustRun(t, 0, "retention", "--json", "--now", now, "--data-dir", f.dataDir), &r)
	p := r.Partitions[0]
	if p.NewLogStart != 80 || len(p.PassedByStart) != 3 || p.CleanAction != "start-grace" || p.CleanTarget != 80 || len(p.CleanObjects) != 3 ||
		p.LocalDeleteBelow == 0 || len(p.LocalSegments) == 0 {
		t.Fatalf("retention --json: %+v", p)
	}
	// Right after the data was written nothing goes but what local
	// retention (30 min) allows of what was uploaded: nothing yet.
	now = time.UnixMilli(t0).Add(2 * time.Minute).UTC().Format(time.RFC3339)
	out = f.mustRun(t, 0, "retention", "orders/0", "--now", now, "--data-dir", f.dataDir)
	if !strings.Contains(out, "local: nothing to delete") || !strings.Contains(out, "log start: stays at 0") || !strings.Contains(out, "clean-up: nothing to delete") {
		t.Fatalf("retention at the start:\n%s", out)
	}
	// Forty minutes in: local retention passed the uploaded segments.
	now = time.UnixMilli(t0).Add(40 * time.Minute).UTC().Format(time.RFC3339)
	out = f.mustRun(t, 0, "retention", "orders/0", "--now", now, "--data-dir", f.dataDir)
	if !strings.Contains(out, "past local.retention.ms=1800000") || !strings.Contains(out, "log start: stays at 0") {
		t.Fatalf("retention after local retention:\n%s", out)
	}
}

// tierNotFound keeps the tier import honest for readers of these tests:
// the objects the fixture writes are read back by tier's own helpers.
var _ = tier.ListObjects
