package loadgen

// This file owns open-loop scheduling. A Pacer lays send times on a fixed
// grid, start + n/rate, independent of when earlier sends completed: a
// producer that falls behind sends its backlog immediately, and each
// record's latency counts from its scheduled time.
//
// Invariant: Pacer.Next returns strictly increasing times for rate > 0.

import (
	"context"
	"time"
)

// Clock is the time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// After is time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Pacer yields scheduled send times at a fixed rate. Not safe for
// concurrent use; each producer owns one.
type Pacer struct {
	start time.Time
	rate  float64 // records/s, > 0
	n     int64   // next record's index on the grid
}

// NewPacer starts a grid at start with rate records per second.
func NewPacer(start time.Time, rate float64) *Pacer {
	return &Pacer{start: start, rate: rate}
}

// At is the scheduled time of record n.
func (p *Pacer) At(n int64) time.Time {
	return p.start.Add(time.Duration(float64(n) * float64(time.Second) / p.rate))
}

// Next returns the next scheduled time and advances.
func (p *Pacer) Next() time.Time {
	t := p.At(p.n)
	p.n++
	return t
}

// Peek returns the next scheduled time without advancing.
func (p *Pacer) Peek() time.Time { return p.At(p.n) }

// Behind is how many scheduled sends are due at now and not yet taken.
func (p *Pacer) Behind(now time.Time) int64 {
	if now.Before(p.start) {
		return 0
	}
	due := int64(now.Sub(p.start).Seconds()*p.rate) + 1
	return max(due-p.n, 0)
}

// minWait is the shortest wait worth a timer; closer sends go out early and
// their latency counts from the actual send (see Limiter.Wait).
const minWait = 200 * time.Microsecond

// Limiter waits for a Pacer's schedule on a Clock.
type Limiter struct {
	Pacer *Pacer
	Clock Clock
}

// Wait blocks until the next scheduled time (or returns at once if it has
// passed) and returns it together with the latency base: the scheduled
// time, or now if the send goes out early.
func (l *Limiter) Wait(ctx context.Context) (scheduled, base time.Time, err error) {
	t := l.Pacer.Next()
	now := l.Clock.Now()
	if d := t.Sub(now); d > minWait {
		select {
		case <-ctx.Done():
			return t, t, ctx.Err()
		case <-l.Clock.After(d):
		}
		now = l.Clock.Now()
	}
	if now.Before(t) {
		return t, now, nil
	}
	return t, t, nil
}
