package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// appendRequestOn is appendOn with a request the test built.
func appendRequestOn(t *testing.T, p *Partition, r *AppendRequest) AppendResult {
	t.Helper()
	p.appendGroup([]*AppendRequest{r})
	p.handleReady()
	select {
	case res := <-r.res:
		return res
	case <-time.After(5 * time.Second):
		t.Fatal("no reply within 5s")
		return AppendResult{}
	}
}

// TestAppendRefusedAfterItsDeadline: a batch the owner takes up after its
// NotAfter time (by the partition's clock) is refused with
// ErrAppendTooLate and leaves no trace, neither in the log nor in the
// producer state, so its retry appends as if it were the first; at the
// deadline itself it is still appended. The large-object ledger relies on
// it: a claimed record is appended within a bound of its claim, or never.
func TestAppendRefusedAfterItsDeadline(t *testing.T) {
	f := &truncationFixture{t: t, fs: vfs.NewMem()}
	f.open()
	f.elect(1, 1)
	now := f.part.clock()
	raw := testBatch(1, 7, 0, 0, 1)
	late := newTestAppend(t, raw).NotAfter(now.Add(-time.Millisecond))
	if res := appendRequestOn(t, f.part, late); !errors.Is(res.Err, ErrAppendTooLate) {
		t.Fatalf("a batch past its deadline: %+v, want ErrAppendTooLate", res)
	}
	if end := f.part.log.EndOffset(); end != 0 {
		t.Fatalf("log end %d after a refused batch, want 0", end)
	}
	if s := f.part.producers[7]; s != nil && len(s.batches) > 0 {
		t.Fatalf("producer 7 has state %+v after its only batch was refused", s)
	}
	onTime := newTestAppend(t, raw).NotAfter(now)
	if res := appendRequestOn(t, f.part, onTime); res.Err != nil || res.Dup || res.Base != 0 {
		t.Fatalf("the retry, at its deadline: %+v, want appended at 0", res)
	}
	if res := appendOn(t, f.part, testBatch(1, 7, 0, 1, 1)); res.Err != nil || res.Base != 1 {
		t.Fatalf("the next batch without a deadline: %+v, want appended at 1", res)
	}
}
