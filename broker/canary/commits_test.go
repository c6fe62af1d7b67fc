package canary

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPendingCommitsHeldUntilDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &pendingCommits{every: time.Second, last: t0}
	if _, ok := p.due(); ok {
		t.Fatal("nothing held, yet a commit is due")
	}
	p.add(map[int32]kgo.EpochOffset{0: {Offset: 5}, 1: {Offset: 3}})
	p.add(map[int32]kgo.EpochOffset{0: {Offset: 4}, 2: {Offset: 1}}) // 0's older offset does not move it back
	if due, ok := p.due(); !ok || !due.Equal(t0.Add(time.Second)) {
		t.Fatalf("due %v %v, want %v", due, ok, t0.Add(time.Second))
	}
	if p.isDue(t0.Add(999 * time.Millisecond)) {
		t.Fatal("due before the interval passed")
	}
	if !p.isDue(t0.Add(time.Second)) {
		t.Fatal("not due once the interval passed")
	}
	got := p.take(t0.Add(time.Second))
	want := map[int32]int64{0: 5, 1: 3, 2: 1}
	if len(got) != len(want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	for part, o := range want {
		if got[part].Offset != o {
			t.Fatalf("partition %d: took %d, want %d", part, got[part].Offset, o)
		}
	}
	if p.take(t0.Add(2*time.Second)) != nil {
		t.Fatal("offsets taken twice")
	}
	if due, _ := p.due(); !due.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("next due %v: the interval counts from the last commit", due)
	}
}

func TestPendingCommitsRestoreKeepsNewer(t *testing.T) {
	p := &pendingCommits{every: time.Second}
	p.add(map[int32]kgo.EpochOffset{0: {Offset: 5}, 1: {Offset: 3}})
	failed := p.take(time.Unix(1, 0))
	p.add(map[int32]kgo.EpochOffset{0: {Offset: 9}}) // polled while the commit failed
	p.restore(failed)
	got := p.take(time.Unix(2, 0))
	if got[0].Offset != 9 || got[1].Offset != 3 {
		t.Fatalf("after a failed commit: %v, want partition 0 at 9 and 1 at 3", got)
	}
	p.add(map[int32]kgo.EpochOffset{0: {Offset: 10}})
	p.drop()
	if _, ok := p.due(); ok {
		t.Fatal("dropped offsets still held")
	}
}
