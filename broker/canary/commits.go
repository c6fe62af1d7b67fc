package canary

// This file owns the consumer's held offsets: the offsets past results
// already in the Sink, committed together at most once per interval rather
// than after every poll. Invariants: an offset is added only after the
// results of the records before it are stored (the caller's order), so a
// commit never passes an id without a result; a failed commit's offsets
// are held again unless a newer offset of the same partition was added
// meanwhile; dropped offsets are only ever re-read, never skipped.

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pendingCommits is the offsets held for the next commit. It is safe for
// concurrent use: the group's revoke callback flushes it too.
type pendingCommits struct {
	every time.Duration

	mu      sync.Mutex
	offsets map[int32]kgo.EpochOffset
	last    time.Time // the last commit (or the session's start)
}

// add holds the offsets past a poll's stored results.
func (p *pendingCommits) add(offsets map[int32]kgo.EpochOffset) {
	if len(offsets) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offsets == nil {
		p.offsets = map[int32]kgo.EpochOffset{}
	}
	for part, o := range offsets {
		if cur, ok := p.offsets[part]; !ok || o.Offset > cur.Offset {
			p.offsets[part] = o
		}
	}
}

// due is when the held offsets are to be committed, if any are held.
func (p *pendingCommits) due() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last.Add(p.every), len(p.offsets) > 0
}

// isDue reports whether offsets are held and a commit is due at now.
func (p *pendingCommits) isDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.offsets) > 0 && !now.Before(p.last.Add(p.every))
}

// take returns the held offsets (nil when none) and counts now as the last
// commit.
func (p *pendingCommits) take(now time.Time) map[int32]kgo.EpochOffset {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.offsets
	p.offsets = nil
	if len(o) > 0 {
		p.last = now
	}
	return o
}

// restore holds a failed commit's offsets again, under any newer ones.
func (p *pendingCommits) restore(offsets map[int32]kgo.EpochOffset) { p.add(offsets) }

// drop forgets the held offsets: their records will be read again.
func (p *pendingCommits) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offsets = nil
}
