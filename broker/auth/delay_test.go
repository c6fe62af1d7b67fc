package auth

import (
	"fmt"
	"testing"
	"time"
)

func TestFailureDelayGrowsAndCaps(t *testing.T) {
	clock := newClock()
	d := NewFailureDelay(FailureDelayConfig{Now: clock.Now})
	if got := d.Delay("10.0.0.1"); got != 0 {
		t.Fatalf("Delay before any failure = %v", got)
	}
	want := []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second,
	}
	for i, w := range want {
		d.Fail("10.0.0.1")
		if got := d.Delay("10.0.0.1"); got != w {
			t.Fatalf("after %d failures Delay = %v, want %v", i+1, got, w)
		}
		clock.Advance(10 * time.Second) // failures 10 s apart stay recent
	}
	for range 100 {
		d.Fail("10.0.0.1")
	}
	if got := d.Delay("10.0.0.1"); got != 5*time.Second {
		t.Fatalf("after many failures Delay = %v, want the cap", got)
	}
	if got := d.Delay("10.0.0.2"); got != 0 {
		t.Fatalf("another IP is delayed %v", got)
	}
}

func TestFailureDelayForgets(t *testing.T) {
	clock := newClock()
	d := NewFailureDelay(FailureDelayConfig{Now: clock.Now})
	for range 5 {
		d.Fail("a")
	}
	clock.Advance(time.Minute - time.Millisecond)
	if got := d.Delay("a"); got != 1600*time.Millisecond {
		t.Fatalf("Delay just before the quiet minute = %v", got)
	}
	clock.Advance(time.Millisecond)
	if got := d.Delay("a"); got != 0 {
		t.Fatalf("Delay after a quiet minute = %v, want 0", got)
	}
	d.Fail("a")
	if got := d.Delay("a"); got != 100*time.Millisecond {
		t.Fatalf("first failure after forgetting = %v, want the base", got)
	}

	d.Fail("b")
	d.Fail("b")
	d.Succeed("b")
	if got := d.Delay("b"); got != 0 {
		t.Fatalf("Delay after a success = %v", got)
	}
}

func TestFailureDelayBounded(t *testing.T) {
	clock := newClock()
	d := NewFailureDelay(FailureDelayConfig{Now: clock.Now, MaxEntries: 8})
	for i := range 100 {
		d.Fail(fmt.Sprintf("10.0.0.%d", i))
		if d.Len() > 8 {
			t.Fatalf("table holds %d IPs, cap 8", d.Len())
		}
	}
	// Forgotten entries make room before a live one is dropped.
	clock.Advance(2 * time.Minute)
	d.Fail("fresh")
	if d.Len() != 1 {
		t.Fatalf("after the sweep the table holds %d, want 1", d.Len())
	}
}
