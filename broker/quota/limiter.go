package quota

// This file owns Bucket, the rate meter of one tenant's rate quota on one
// broker: a token bucket that may go into debt.
//
// Tokens accrue at the rate up to the capacity (rate × burst window). A
// request is always recorded, whole, even when that takes the bucket below
// zero: a rate quota never refuses what was already received (KIP-219).
// The debt is the answer: the caller holds the client for debt / rate (it
// stops reading its connection, or answers 429 with Retry-After), after
// which the bucket is back at zero. Because every unit is charged and the
// client is held until the charge is paid, what a bucket accepts over a
// span T is at most capacity + rate × T plus the last request, whatever
// the client does, so the long-run rate is the quota exactly; the burst
// window bounds only how far a short burst may run ahead of it.
//
// Invariant: tokens ≤ capacity; tokens < 0 only by recording (a debt).
// Invariant: Delay is 0 exactly when tokens ≥ 0.
//
// A Bucket is not safe for concurrent use; Meters guards its buckets.

import (
	"math"
	"time"
)

// DefaultBurst is the burst window of a bucket: how far ahead of its rate a
// tenant may run before it is held.
const DefaultBurst = time.Second

// FetchSlice is how much of its rate one fetch may take: a fetch's
// max_bytes is capped at FetchSlice's worth of the tenant's rate (at least
// one batch is still returned, as Kafka does). Kafka caps it at one quota
// window (KAFKA-9677); a tenth of that, with the hold that follows each
// answer, spreads a held consumer's bytes over the second instead of one
// burst a second that takes a whole core for milliseconds from the
// tenants beside it (BENCHMARKS.md, the tiered replay).
const FetchSlice = 100 * time.Millisecond

// Bucket is a token bucket with debt. The zero value is unusable; use
// NewBucket.
type Bucket struct {
	rate   float64 // units per second, > 0
	burst  time.Duration
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

// NewBucket returns a full bucket of rate units/s and the burst window
// burst (DefaultBurst when ≤ 0).
func NewBucket(rate float64, burst time.Duration, now time.Time) *Bucket {
	if burst <= 0 {
		burst = DefaultBurst
	}
	b := &Bucket{rate: rate, burst: burst, last: now}
	b.tokens = b.capacity()
	return b
}

// Rate is the bucket's rate in units/s.
func (b *Bucket) Rate() float64 { return b.rate }

// capacity is rate × burst window.
func (b *Bucket) capacity() float64 { return b.rate * b.burst.Seconds() }

// refill brings tokens up to now. A clock that steps back adds nothing.
func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.capacity(), b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// SetRate changes the rate (a new quota, a new share of it): the tokens
// earned so far at the old rate are kept, capped at the new capacity, and a
// debt is kept as it is, so a lowered quota cannot forgive what is owed.
func (b *Bucket) SetRate(rate float64, now time.Time) {
	if rate <= 0 || rate == b.rate {
		return
	}
	b.refill(now)
	b.rate = rate
	b.tokens = math.Min(b.tokens, b.capacity())
}

// MinBurst is the shortest burst window SetBurst sets: a tenant held to
// its base rate (the disk ladder's second step) still gets this much.
const MinBurst = 10 * time.Millisecond

// SetBurst changes the burst window (the disk ladder lowers it for tenants
// of the low priority class): saved tokens are capped at the new
// capacity, a debt is kept.
func (b *Bucket) SetBurst(burst time.Duration, now time.Time) {
	burst = max(burst, MinBurst)
	if burst == b.burst {
		return
	}
	b.refill(now)
	b.burst = burst
	b.tokens = math.Min(b.tokens, b.capacity())
}

// Record charges n units at now and returns how long the client must be
// held: 0 while the bucket is not in debt, else debt / rate.
func (b *Bucket) Record(n float64, now time.Time) time.Duration {
	b.refill(now)
	b.tokens -= n
	return b.delay()
}

// Delay is how long the client must be held at now without charging
// anything: how long until the debt is paid.
func (b *Bucket) Delay(now time.Time) time.Duration {
	b.refill(now)
	return b.delay()
}

func (b *Bucket) delay() time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	// Rounded up, so a client held for the delay finds the debt paid.
	return time.Duration(math.Ceil(-b.tokens / b.rate * float64(time.Second)))
}

// Take charges n units only if the bucket is not in debt and reports
// whether it did: for what is refused rather than held (a new connection).
// It may take the bucket into debt by less than n, so a rate below one
// unit per burst window still admits (on average at the rate).
func (b *Bucket) Take(n float64, now time.Time) bool {
	b.refill(now)
	if b.tokens <= 0 {
		return false
	}
	b.tokens -= n
	return true
}

// Available is the tokens at now (negative: the debt), for a fetch's cap.
func (b *Bucket) Available(now time.Time) float64 {
	b.refill(now)
	return b.tokens
}
