package cache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestSecondChance: an entry read again survives a scan of one-time entries
// several times the budget; the one-time entries leave oldest first.
func TestSecondChance(t *testing.T) {
	const (
		entrySize = 1 << 10
		capacity  = 16
	)
	c := newTestCache(t, Config{MaxBytes: capacity * entrySize})
	var calls atomic.Int64
	get := func(key string) {
		t.Helper()
		if _, err := c.Get(t.Context(), key, constFill(make([]byte, entrySize), &calls)); err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
	}
	get("hot")
	for i := range 5 * capacity {
		get(fmt.Sprintf("scan#%d", i))
		get("hot")
	}
	if calls.Load() != 1+5*capacity {
		t.Fatalf("%d fills, want %d: the hot entry was evicted", calls.Load(), 1+5*capacity)
	}
	// The hot entry takes one place; the newest scan entries fill the rest.
	const scans, kept = 5 * capacity, capacity - 1
	for i := range scans {
		key := fmt.Sprintf("scan#%d", i)
		if want := i >= scans-kept; c.contains(key) != want {
			t.Errorf("%s cached = %v, want %v", key, !want, want)
		}
	}
	if s := c.Stats(); s.Evicted != scans-kept || s.Bytes != capacity*entrySize {
		t.Fatalf("stats %+v, want %d evicted and a full budget", s, scans-kept)
	}
}

// TestSequentialReplayFillsOnce: readers replaying a partition with
// read-ahead, a few chunks apart, in a cache much smaller than the log, make
// exactly one fill per chunk between them and nothing is refused.
func TestSequentialReplayFillsOnce(t *testing.T) {
	tests := []struct {
		name    string
		readers int
		lag     int
	}{
		{"one reader", 1, 0},
		{"three readers 20 chunks apart", 3, 20},
		{"two readers in step", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const (
					chunkSize = 16 << 10
					chunks    = 500
				)
				c := newTestCache(t, Config{MaxBytes: 64 * chunkSize})
				refs := make([]Ref, chunks)
				for i := range refs {
					refs[i] = Ref{Key: fmt.Sprintf("obj-%d#%d", i/8, i%8), Fill: func(context.Context) ([]byte, error) {
						return make([]byte, chunkSize), nil
					}}
				}
				readers := make([]*Readahead, tt.readers)
				for r := range readers {
					readers[r] = c.NewReadahead(4)
				}
				for i := range chunks + tt.lag*tt.readers {
					for r, ra := range readers {
						at := i - r*tt.lag
						if at < 0 || at >= chunks {
							continue
						}
						ra.Advance(refs[at+1:])
						synctest.Wait() // fills are instantaneous here: let read-ahead land
						if _, err := c.Get(t.Context(), refs[at].Key, refs[at].Fill); err != nil {
							t.Fatal(err)
						}
					}
				}
				s := c.Stats()
				if s.Fills != chunks || s.Rejected != 0 || s.Hits+s.Misses != uint64(chunks*tt.readers) {
					t.Fatalf("stats %+v, want %d fills for %d reads", s, chunks, chunks*tt.readers)
				}
			})
		})
	}
}
