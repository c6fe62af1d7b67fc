package loadgen

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when asked; After advances it to the deadline at
// once (an auto-advancing clock), so Limiter.Wait never blocks.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers int // After calls
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers++
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var epoch = time.Unix(1_700_000_000, 0)

func TestPacerGrid(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		n    int64
		want time.Duration // offset of record n from start
	}{
		{"first at start", 1000, 0, 0},
		{"1000/s", 1000, 1, time.Millisecond},
		{"1000/s far", 1000, 5000, 5 * time.Second},
		{"fractional rate", 3, 1, 333333333 * time.Nanosecond},
		{"high rate", 1e6, 10, 10 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(epoch, tt.rate)
			if got := p.At(tt.n).Sub(epoch); got != tt.want {
				t.Fatalf("At(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestPacerNextIncreasing(t *testing.T) {
	p := NewPacer(epoch, 7777)
	prev := p.Next()
	for i := 0; i < 10000; i++ {
		next := p.Next()
		if !next.After(prev) {
			t.Fatalf("record %d scheduled at %v, not after %v", i+1, next, prev)
		}
		prev = next
	}
}

func TestPacerBehind(t *testing.T) {
	tests := []struct {
		name  string
		taken int
		at    time.Duration
		want  int64
	}{
		{"before start", 0, -time.Second, 0},
		{"at start one due", 0, 0, 1},
		{"one second at 100/s", 0, time.Second, 101},
		{"caught up", 101, time.Second, 0},
		{"ahead", 200, time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(epoch, 100)
			for i := 0; i < tt.taken; i++ {
				p.Next()
			}
			if got := p.Behind(epoch.Add(tt.at)); got != tt.want {
				t.Fatalf("Behind = %d, want %d", got, tt.want)
			}
		})
	}
}

// On schedule, Wait sleeps until each scheduled time and latency counts from it.
func TestLimiterOnSchedule(t *testing.T) {
	clk := &fakeClock{now: epoch}
	lim := &Limiter{Pacer: NewPacer(epoch.Add(time.Second), 100), Clock: clk}
	for i := 0; i < 50; i++ {
		sched, base, err := lim.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := epoch.Add(time.Second + time.Duration(i)*10*time.Millisecond)
		if !sched.Equal(want) || !base.Equal(want) || !clk.Now().Equal(want) {
			t.Fatalf("send %d: scheduled %v base %v now %v, want all %v", i, sched, base, clk.Now(), want)
		}
	}
}

// Behind schedule (a stalled send), Wait returns at once with the old
// scheduled times: the stall is charged to latency, not hidden.
func TestLimiterCoordinatedOmission(t *testing.T) {
	clk := &fakeClock{now: epoch}
	lim := &Limiter{Pacer: NewPacer(epoch, 1000), Clock: clk}
	if _, _, err := lim.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.advance(500 * time.Millisecond) // the first send stalled for 500 ms
	timers := clk.timers
	for i := 1; i <= 400; i++ {
		sched, base, err := lim.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := epoch.Add(time.Duration(i) * time.Millisecond)
		if !sched.Equal(want) || !base.Equal(want) {
			t.Fatalf("send %d: scheduled %v base %v, want %v", i, sched, base, want)
		}
		if lat := clk.Now().Sub(base); lat < 100*time.Millisecond {
			t.Fatalf("send %d: latency %v hides the stall", i, lat)
		}
	}
	if clk.timers != timers {
		t.Fatalf("waited %d times while behind schedule", clk.timers-timers)
	}
}

// A send due within minWait goes out early; its latency counts from the
// actual send, never from the later scheduled time.
func TestLimiterEarlySend(t *testing.T) {
	clk := &fakeClock{now: epoch}
	lim := &Limiter{Pacer: NewPacer(epoch.Add(minWait/2), 1), Clock: clk}
	sched, base, err := lim.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !base.Equal(epoch) || !sched.Equal(epoch.Add(minWait/2)) || clk.timers != 0 {
		t.Fatalf("scheduled %v base %v timers %d", sched, base, clk.timers)
	}
}

func TestLimiterCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lim := &Limiter{Pacer: NewPacer(epoch.Add(time.Hour), 1), Clock: blockedClock{now: epoch}}
	if _, _, err := lim.Wait(ctx); err == nil {
		t.Fatal("Wait on a canceled context returned nil")
	}
}

type blockedClock struct{ now time.Time }

func (c blockedClock) Now() time.Time                       { return c.now }
func (c blockedClock) After(time.Duration) <-chan time.Time { return nil }
