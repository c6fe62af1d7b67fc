package redriveapi

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/internal/freeport"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
)

// memBackend is topics in memory: the seam the runner publishes through.
// crashAt > 0 makes the crashAt-th Produce append its record and then end
// the calling goroutine (runtime.Goexit) before it returns: a broker that
// died after its copy was acknowledged and before its progress was written.
// With crashUnacked, that record is appended above the high watermark
// instead (the runner died before a quorum had it); it is committed when
// commit is called, or when a later Produce is acknowledged above it.
type memBackend struct {
	mu           sync.Mutex
	topics       map[string][][]Record
	hw           map[string][]int64 // per topic and partition; absent: everything is committed
	produced     int
	crashAt      int
	crashUnacked bool
	refuse       func(Record) error // when set and not nil for a record, Produce refuses it
}

// hwOf is the high watermark of a partition; b.mu is held.
func (b *memBackend) hwOf(topic string, p int32) int64 {
	if hw, ok := b.hw[topic]; ok {
		return hw[p]
	}
	return int64(len(b.topics[topic][p]))
}

// commit moves every partition's high watermark to its log end.
func (b *memBackend) commit() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hw = nil
}

func (b *memBackend) Read(_ context.Context, topic string, p int32, from int64, _ int) ([]Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", node.ErrUnknownTopic, topic)
	}
	log := t[p][:b.hwOf(topic, p)]
	if from >= int64(len(log)) {
		return nil, nil
	}
	return append([]Record(nil), log[from:min(int64(len(log)), from+7)]...), nil
}

func (b *memBackend) Produce(_ context.Context, topic string, p int32, rec Record) (int64, error) {
	if b.refuse != nil {
		if err := b.refuse(rec); err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	rec.Offset = int64(len(b.topics[topic][p]))
	b.topics[topic][p] = append(b.topics[topic][p], rec)
	b.produced++
	crash := b.produced == b.crashAt
	switch {
	case crash && b.crashUnacked:
		if b.hw == nil {
			b.hw = map[string][]int64{}
		}
		for name, parts := range b.topics {
			b.hw[name] = make([]int64, len(parts))
			for i, log := range parts {
				b.hw[name][i] = int64(len(log))
			}
		}
		b.hw[topic][p] = rec.Offset
	case b.hw != nil:
		b.hw[topic][p] = rec.Offset + 1 // acknowledged: committed with all below it
	}
	b.mu.Unlock()
	if crash {
		runtime.Goexit()
	}
	return rec.Offset, nil
}

func (b *memBackend) Bounds(_ context.Context, topic string, p int32) (Bounds, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok {
		return Bounds{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, topic)
	}
	return Bounds{HW: b.hwOf(topic, p), End: int64(len(t[p]))}, nil
}

func (b *memBackend) Partitions(topic string) (int32, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	return int32(len(t)), ok
}

func openStore(t *testing.T) *meta.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := meta.Open(ctx, meta.Config{DataDir: t.TempDir(), Name: "1", ListenClient: freeport.Must(t), ListenPeer: freeport.Must(t),
		StartTimeout: 30 * time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRunnerCrashAfterAckBeforeProgressPublishesOnce: a worker dies right
// after a copy was acknowledged, with progress unrecorded for the records
// before it; the next run (after the claim passed on) finds those copies
// on the target and publishes none of them again; every dead letter in
// scope is on the target exactly once. Without the scan of the target
// (scanTarget) the records since the last progress write are published
// twice.
func TestRunnerCrashAfterAckBeforeProgressPublishesOnce(t *testing.T) {
	testRunnerCrashPublishesOnce(t, false)
}

// TestRunnerCrashBeforeAckPublishesOnce: the same, but the runner dies
// while its last copy is on the target's leader above the high watermark
// (not yet on a quorum); it is committed moments after the next runner
// starts. Scanning only to the high watermark (as the runner did) misses
// it and publishes that dead letter twice, as a kill -9 of the runner on
// real brokers showed (chaos/cluster TestRedriveSurvivesKill9OfItsRunner).
func TestRunnerCrashBeforeAckPublishesOnce(t *testing.T) {
	testRunnerCrashPublishesOnce(t, true)
}

func testRunnerCrashPublishesOnce(t *testing.T, unacked bool) {
	store := openStore(t)
	ctx := t.Context()
	const n = 250 // progress is written every progressEvery (100) records
	be := &memBackend{topics: map[string][][]Record{"t.dlq": {nil}, "t": {nil, nil}}, crashAt: 140, crashUnacked: unacked}
	for i := range n {
		m := queue.Meta{SourceTopic: "t", SourcePartition: int32(i % 2), Attempt: 1, Tier: -1, DeadReason: "permanent",
			FirstSeen: time.UnixMilli(1), Due: time.UnixMilli(2), History: []queue.Failure{{At: time.UnixMilli(1), Class: "permanent"}}}
		be.topics["t.dlq"][0] = append(be.topics["t.dlq"][0], Record{Offset: int64(i), Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i),
			MessageID: fmt.Sprintf("m%d", i), Headers: m.Headers()})
	}
	m := New(be, store, 1, zerolog.Nop())
	job, err := store.CreateRedrive(ctx, meta.Redrive{ID: "j1", Tenant: "default", DLQ: "t.dlq", Target: "t",
		Starts: map[int32]int64{0: 0}, Ends: map[int32]int64{0: n}, TargetStarts: map[int32]int64{0: 0, 1: 0},
		State: meta.RedriveRunning, CreatedMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := store.Register(ctx, meta.BrokerInfo{NodeID: 1, AZ: "a", Kafka: "127.0.0.1:1", HTTP: "127.0.0.1:2"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		claim, err := store.ClaimRedrive(ctx, "j1", 1, reg.Info().Lease)
		if err != nil {
			t.Fatal(err)
		}
		_, prog, err := store.GetRedrive(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		pr, ok := prog[0]
		if !ok {
			pr = meta.RedriveProgress{Partition: 0, Cursor: 0}
		}
		done := make(chan error, 1)
		go func() {
			defer close(done)
			done <- m.runPartition(ctx, reg, claim, job, pr, nil)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("worker did not end")
		}
		if err := store.ReleaseRedrive(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	run() // dies at its 140th copy: progress recorded at 100
	_, prog, err := store.GetRedrive(ctx, "j1")
	if err != nil || prog[0].Cursor != progressEvery {
		t.Fatalf("progress after the crash: %+v %v", prog, err)
	}
	be.crashAt = 0
	if unacked {
		if got := be.topics["t"][139%2]; be.hwOf("t", 139%2) != int64(len(got))-1 {
			t.Fatalf("the crashed copy is not above the high watermark")
		}
		time.AfterFunc(300*time.Millisecond, be.commit) // a follower reports it
	}
	run()
	_, prog, err = store.GetRedrive(ctx, "j1")
	if err != nil || prog[0].Cursor != n || prog[0].Deduped != 40 || prog[0].Redriven != n-40 {
		t.Fatalf("progress at the end: %+v %v", prog, err)
	}
	copies := map[string]int{}
	for p, log := range be.topics["t"] {
		for _, r := range log {
			copies[r.MessageID]++
			if o, ok := queue.RedrivenOffset(r.Headers, "j1", 0); !ok || fmt.Sprintf("m%d", o) != r.MessageID || int32(o%2) != int32(p) {
				t.Errorf("copy %s in partition %d names %d (%v)", r.MessageID, p, o, ok)
			}
		}
	}
	for i := range n {
		if id := fmt.Sprintf("m%d", i); copies[id] != 1 {
			t.Errorf("%s: %d copies", id, copies[id])
		}
	}
}

// TestRunnerFailsAJobWhoseTopicsAreGone: a job whose DLQ or target was
// deleted ends failed, saying why, instead of retrying for ever.
func TestRunnerFailsAJobWhoseTopicsAreGone(t *testing.T) {
	store := openStore(t)
	ctx := t.Context()
	be := &memBackend{topics: map[string][][]Record{"t.dlq": {{{Offset: 0, Value: []byte("v")}}}, "t": {nil}}}
	m := New(be, store, 1, zerolog.Nop())
	reg, err := store.Register(ctx, meta.BrokerInfo{NodeID: 1, AZ: "a", Kafka: "127.0.0.1:1", HTTP: "127.0.0.1:2"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range map[string]struct{ dlq, target, reason string }{
		"no-dlq":    {"gone.dlq", "t", "the DLQ no longer exists"},
		"no-target": {"t.dlq", "gone", "redrive target does not exist: gone"},
	} {
		if _, err := store.CreateRedrive(ctx, meta.Redrive{ID: id, Tenant: "default", DLQ: c.dlq, Target: c.target,
			Starts: map[int32]int64{0: 0}, Ends: map[int32]int64{0: 1}, State: meta.RedriveRunning, CreatedMs: 1}); err != nil {
			t.Fatal(err)
		}
		claim, err := store.ClaimRedrive(ctx, id, 1, reg.Info().Lease)
		if err != nil {
			t.Fatal(err)
		}
		m.runJob(ctx, reg, claim)
		job, _, err := store.GetRedrive(ctx, id)
		if err != nil || job.State != meta.RedriveFailed || job.Reason != c.reason {
			t.Errorf("%s: %+v %v, want failed: %s", id, job, err, c.reason)
		}
		if _, held, _ := store.RedriveHolder(ctx, id); held {
			t.Errorf("%s: the claim is still held", id)
		}
	}
}

// TestRunnerFailsAJobWhoseCopyIsRefused: a copy the target refuses for
// good (ErrRefused: its object reference can no longer be claimed) fails
// the job with the reason, instead of retrying it forever; the copies
// before it are on the target once, nothing after it was published, and
// the recorded cursor is not past it (the dead letter stays to decide).
func TestRunnerFailsAJobWhoseCopyIsRefused(t *testing.T) {
	store := openStore(t)
	ctx := t.Context()
	dlq := []Record{{Offset: 0, Value: []byte("v0")}, {Offset: 1, Value: []byte("v1")}, {Offset: 2, Value: []byte("v2")}}
	be := &memBackend{topics: map[string][][]Record{"t.dlq": {dlq}, "t": {nil}}, refuse: func(r Record) error {
		if string(r.Value) == "v1" {
			return fmt.Errorf("%w: the copy to t-0 is not written: object reference x: expired", ErrRefused)
		}
		return nil
	}}
	m := New(be, store, 1, zerolog.Nop())
	reg, err := store.Register(ctx, meta.BrokerInfo{NodeID: 1, AZ: "a", Kafka: "127.0.0.1:1", HTTP: "127.0.0.1:2"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateRedrive(ctx, meta.Redrive{ID: "r", Tenant: "default", DLQ: "t.dlq", Target: "t",
		Starts: map[int32]int64{0: 0}, Ends: map[int32]int64{0: 3}, State: meta.RedriveRunning, CreatedMs: 1}); err != nil {
		t.Fatal(err)
	}
	claim, err := store.ClaimRedrive(ctx, "r", 1, reg.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.runJob(ctx, reg, claim) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the job still runs 20 s after its copy was refused for good")
	}
	job, prog, err := store.GetRedrive(ctx, "r")
	if err != nil || job.State != meta.RedriveFailed || !strings.Contains(job.Reason, "redrive copy refused") ||
		!strings.Contains(job.Reason, "object reference x: expired") {
		t.Fatalf("job %+v %v, want failed with the refusal", job, err)
	}
	if p, ok := prog[0]; ok && p.Cursor > 1 {
		t.Fatalf("cursor %d recorded past the refused dead letter at 1", p.Cursor)
	}
	if got := be.topics["t"][0]; len(got) != 1 || string(got[0].Value) != "v0" {
		t.Fatalf("target holds %+v, want the copy of v0 only", got)
	}
}
