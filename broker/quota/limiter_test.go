package quota

import (
	"math"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

// simulate runs one client against b for span: it sends a request of
// size(i) units, then waits the longer of the held delay (the caller
// enforcing it: the connection unread) and its own gap(i); lag > 0 is a
// client that ignores the delay, held by the broker reading its next
// request only after the delay of the request lag requests before (the
// replies in flight when the mute begins). It returns the units accepted.
func simulate(b *Bucket, span time.Duration, size func(i int) float64, gap func(i int) time.Duration, lag int) float64 {
	return simulateFrom(b, 0, span, size, gap, lag)
}

// simulateFrom is simulate counting only what is accepted from from on.
func simulateFrom(b *Bucket, from, span time.Duration, size func(i int) float64, gap func(i int) time.Duration, lag int) float64 {
	now := epoch
	var accepted float64
	var mutes []time.Time // when the reader may read again, by request
	for i := 0; ; i++ {
		if i > lag && mutes[i-1-lag].After(now) {
			now = mutes[i-1-lag]
		}
		if now.Sub(epoch) >= span {
			return accepted
		}
		n := size(i)
		d := b.Record(n, now)
		if now.Sub(epoch) >= from {
			accepted += n
		}
		mutes = append(mutes, now.Add(d))
		if lag == 0 {
			now = now.Add(max(d, gap(i)))
		} else {
			now = now.Add(gap(i))
		}
	}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.1f, want %.1f ±%.0f%%", what, got, want, tol*100)
	} else {
		t.Logf("%s: %.1f (quota %.1f, %+.2f%%)", what, got, want, (got/want-1)*100)
	}
}

// TestBucketLongRunRate: a client wanting more than its quota gets the
// quota over 60 simulated seconds, ±2%, steady, bursty, in small requests,
// and when it ignores throttling (sends back to back; the caller holds its
// connection, 16 requests behind). The rate is measured over 60 s after a
// 5 s warm-up, so the start's burst (one window) and the debt owed at the
// end (at most the requests in flight) are not counted: TestBucketBurstBound
// bounds those.
func TestBucketLongRunRate(t *testing.T) {
	const rate = 256 << 10 // bytes/s
	span := 60 * time.Second
	cases := []struct {
		name string
		size func(int) float64
		gap  func(int) time.Duration
		lag  int
	}{
		{"steady 2x", func(int) float64 { return 16 << 10 }, func(int) time.Duration { return 31 * time.Millisecond }, 0},
		{"as fast as it can", func(int) float64 { return 64 << 10 }, func(int) time.Duration { return 0 }, 0},
		{"bursty", func(i int) float64 { return float64(1+i%7) * 40 * 1024 }, func(i int) time.Duration {
			if i%50 == 49 {
				return 400 * time.Millisecond // a pause after each burst of 50
			}
			return 0
		}, 0},
		{"many small", func(int) float64 { return 100 }, func(int) time.Duration { return 100 * time.Microsecond }, 0},
		{"ignores throttling", func(int) float64 { return 64 << 10 }, func(int) time.Duration { return 0 }, 16},
		{"ignores throttling, small", func(int) float64 { return 1 << 10 }, func(int) time.Duration { return 0 }, 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBucket(rate, 0, epoch)
			warm := 5 * time.Second
			got := simulateFrom(b, warm, warm+span, c.size, c.gap, c.lag) / span.Seconds()
			within(t, "bytes/s", got, rate, 0.02)
		})
	}
}

// TestBucketBurstBound: counted from the very start, what a client gets
// over a span is at most one burst window plus the rate times the span plus
// what it had in flight: the full bucket it starts with and the debt it
// leaves.
func TestBucketBurstBound(t *testing.T) {
	const rate, req, lag = 256 << 10, 64 << 10, 16
	span := 60 * time.Second
	b := NewBucket(rate, 0, epoch)
	got := simulate(b, span, func(int) float64 { return req }, func(int) time.Duration { return 0 }, lag)
	limit := rate*(span.Seconds()+DefaultBurst.Seconds()) + (lag+1)*req
	if got > limit || got < rate*span.Seconds() {
		t.Fatalf("accepted %.0f bytes in %v, want between %.0f and %.0f", got, span, rate*span.Seconds(), limit)
	}
}

// TestBucketUnderQuota: a client below its quota is never held.
func TestBucketUnderQuota(t *testing.T) {
	b := NewBucket(1000, 0, epoch)
	now := epoch
	for i := range 6000 {
		if d := b.Record(5, now); d != 0 {
			t.Fatalf("request %d held %v at half the quota", i, d)
		}
		now = now.Add(10 * time.Millisecond)
	}
}

// TestBucketRequestPercentage: request_percentage 10 is 0.1 s of handler
// time per second; a client whose requests take 5 ms each, sent back to
// back, is held to it.
func TestBucketRequestPercentage(t *testing.T) {
	span := 60 * time.Second
	b := NewBucket(unitsPerSecond(RequestPercentage, 10), 0, epoch)
	got := simulate(b, span, func(int) float64 { return 0.005 }, func(int) time.Duration { return 5 * time.Millisecond }, 0)
	within(t, "handler seconds per second", got/span.Seconds(), 0.1, 0.02)
}

// TestBucketTake: connections refused over connection_creation_rate, even
// at a rate below one per burst window.
func TestBucketTake(t *testing.T) {
	for _, rate := range []float64{5, 0.5} {
		b := NewBucket(rate, 0, epoch)
		span := 60 * time.Second
		var taken float64
		for now := epoch; now.Sub(epoch) < span; now = now.Add(10 * time.Millisecond) {
			if b.Take(1, now) {
				taken++
			}
		}
		// One window's burst on top of rate × span.
		within(t, "connections/s", taken/span.Seconds(), rate, 0.02+1/span.Seconds())
	}
}

// TestBucketSetRateKeepsDebt: lowering the rate keeps what is owed.
func TestBucketSetRateKeepsDebt(t *testing.T) {
	b := NewBucket(100, 0, epoch)
	if d := b.Record(300, epoch); d != 2*time.Second {
		t.Fatalf("delay %v, want 2s", d)
	}
	b.SetRate(50, epoch)
	if d := b.Delay(epoch); d != 4*time.Second {
		t.Fatalf("after halving the rate the delay is %v, want 4s", d)
	}
	if d := b.Delay(epoch.Add(4 * time.Second)); d != 0 {
		t.Fatalf("delay %v after the debt is paid", d)
	}
}

// TestMetersShareAndLimits: the meters charge only tenants with limits, at
// this broker's share, and forget a removed limit.
func TestMetersShareAndLimits(t *testing.T) {
	src := Static{"a": {ProducerByteRate: 1000, Connections: 2, ConnectionCreationRate: 100}}
	m := NewMeters(src, 0, nil)
	if d := m.Record("b", ProducerByteRate, 1e9, epoch); d != 0 {
		t.Fatalf("tenant without quotas held %v", d)
	}
	m.SetShares(map[string]map[string]float64{"a": {ProducerByteRate: 0.5}}, 1)
	if d := m.Record("a", ProducerByteRate, 1500, epoch); d != 2*time.Second {
		t.Fatalf("delay %v, want 2s at a half share (500/s, 500 of burst)", d)
	}
	if w, ok := m.FetchCap("a", ProducerByteRate); !ok || w != 50 {
		t.Fatalf("fetch cap %v %v, want 50 (a tenth of a second at 500/s)", w, ok)
	}
	for i, want := range []string{"", "", RefusedConnections} {
		if got := m.OpenConn("a", epoch); got != want {
			t.Fatalf("connection %d: %q, want %q", i, got, want)
		}
	}
	m.CloseConn("a")
	if got := m.OpenConn("a", epoch); got != "" {
		t.Fatalf("after a close: %q", got)
	}
	u := m.TakeUsage(time.Second)
	if u["a"][ProducerByteRate] != 3000 || u["a"][Connections] != 2 {
		t.Fatalf("usage %v, want 1500 bytes/s doubled for being held, 2 connections", u)
	}
	delete(src, "a")
	if d := m.Record("a", ProducerByteRate, 1e9, epoch); d != 0 {
		t.Fatalf("a removed limit still holds %v", d)
	}
}

// TestMetersBurstPolicy: a tenant whose burst the policy lowers (the disk
// ladder's second step for a low-priority tenant) is held for a burst its
// full window would have absorbed; its debt is kept, and its long-run rate
// is the quota either way.
func TestMetersBurstPolicy(t *testing.T) {
	src := Static{"low": {ProducerByteRate: 1000}, "std": {ProducerByteRate: 1000}}
	m := NewMeters(src, time.Second, nil)
	lowered := false
	m.SetBurstPolicy(func(tenant string) time.Duration {
		if lowered && tenant == "low" {
			return MinBurst
		}
		return 0 // the default
	})
	// Full windows: 800 bytes at once pass without a hold.
	for _, tn := range []string{"low", "std"} {
		if d := m.Record(tn, ProducerByteRate, 800, epoch); d != 0 {
			t.Fatalf("%s held %v inside its burst", tn, d)
		}
	}
	lowered = true
	later := epoch.Add(time.Second) // both buckets full again
	if d := m.Record("std", ProducerByteRate, 800, later); d != 0 {
		t.Errorf("std held %v inside its burst", d)
	}
	// low's window is now 10 ms: 10 bytes of credit, 790 owed.
	if d := m.Record("low", ProducerByteRate, 800, later); d != 790*time.Millisecond {
		t.Errorf("low held %v, want 790ms at its base rate", d)
	}
	b := NewBucket(1000, time.Second, epoch)
	b.SetBurst(time.Millisecond, epoch) // below the floor
	if got := b.Available(epoch); got != 10 {
		t.Errorf("after SetBurst below MinBurst: %v tokens, want 10", got)
	}
}
