package frames

// Pure tests of the shares of request memory (memory.go) and of the receive
// rate meter (reader.go): no goroutines, no sockets.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// simFrame is a frame being read in a test: its reservation and, while it
// waits, its waiter.
type simFrame struct {
	share string
	size  int64 // 0: no frame
	r     Reservation
	w     *memWaiter
}

// grow asks for n more bytes; the frame waits if they are not granted.
func (f *simFrame) grow(m *Memory, n int64) {
	if f.r.share == "" {
		f.r.share = f.share
	}
	f.w = m.tryGrow(&f.r, n)
}

// poll collects a grant that arrived; it reports whether the frame is not
// waiting.
func (f *simFrame) poll(m *Memory) bool {
	if f.w == nil {
		return true
	}
	select {
	case od := <-f.w.ready:
		m.granted(&f.r, f.w.n, od)
		f.w = nil
		return true
	default:
		return false
	}
}

func (f *simFrame) release(m *Memory) {
	m.read(&f.r)
	m.Release(&f.r)
	f.size, f.r = 0, Reservation{}
}

func mustPoll(t *testing.T, m *Memory, f *simFrame, want bool, what string) {
	t.Helper()
	if got := f.poll(m); got != want {
		t.Fatalf("%s: granted %v, want %v", what, got, want)
	}
}

// TestRequestMemoryShares: a share whose frames wait never holds back
// another share's frame; memory that comes free goes first to the share
// under its guaranteed part, then to the borrower.
func TestRequestMemoryShares(t *testing.T) {
	m := NewMemory(100, nil)
	a1, a2, a3, a4 := &simFrame{share: "a"}, &simFrame{share: "a"}, &simFrame{share: "a"}, &simFrame{share: "a"}
	b1, b2 := &simFrame{share: "b"}, &simFrame{share: "b"}
	a1.grow(m, 60)
	a2.grow(m, 30)
	mustPoll(t, m, a1, true, "a1 60")
	mustPoll(t, m, a2, true, "a2 30")
	a3.grow(m, 20)
	mustPoll(t, m, a3, true, "a3 20 by a's overdraft")
	if !a3.r.overdraft || !a3.r.ownsOD {
		t.Fatalf("a3 %+v; want it holding a's overdraft", a3.r)
	}
	a4.grow(m, 5)
	mustPoll(t, m, a4, false, "a4 5 while a's overdraft is held and the memory spent")

	// a waits; b's frame is not held back by it.
	b1.grow(m, 5)
	mustPoll(t, m, b1, true, "b1 5 (b's overdraft) past a's waiter")
	b2.grow(m, 3)
	mustPoll(t, m, b2, false, "b2 3 while b's overdraft is held and the memory spent")

	// a1's 60 come free: a (50 held, guaranteed 50) is over its part with
	// a4, b (5) is under: b2 first, then a4 borrows what is left.
	a1.release(m)
	mustPoll(t, m, b2, true, "b2 after a1's release")
	mustPoll(t, m, a4, true, "a4 after b2")
	if got := m.Reserved(); got != 30+20+5+5+3 {
		t.Fatalf("reserved %d, want 63", got)
	}
	for _, f := range []*simFrame{a2, a3, a4, b1, b2} {
		f.release(m)
	}
	if m.Reserved() != 0 || len(m.shares) != 0 {
		t.Fatalf("reserved %d, %d active shares after every release", m.Reserved(), len(m.shares))
	}
}

// TestRequestMemoryBorrowReturnsFirstUnderShare: memory that comes free
// goes to a share under its guaranteed part before a borrower, even one
// that waited first.
func TestRequestMemoryBorrowReturnsFirstUnderShare(t *testing.T) {
	m := NewMemory(100, nil)
	a0, a1, a2, a3 := &simFrame{share: "a"}, &simFrame{share: "a"}, &simFrame{share: "a"}, &simFrame{share: "a"}
	b0, b1 := &simFrame{share: "b"}, &simFrame{share: "b"}
	a0.grow(m, 50) // a alone: all of the memory is its part
	a1.grow(m, 45)
	b0.grow(m, 10) // does not fit: b's overdraft
	a2.grow(m, 5)  // does not fit: a's overdraft
	for _, f := range []*simFrame{a0, a1, b0, a2} {
		mustPoll(t, m, f, true, "the first frames")
	}
	a3.grow(m, 10) // waits first
	b1.grow(m, 35) // waits second
	mustPoll(t, m, a3, false, "a3")
	mustPoll(t, m, b1, false, "b1")

	// 40 come free; a holds 50 (its part), b 10: b1 fits in b's part and
	// goes first; a3 would borrow and no longer fits.
	a0.release(m)
	mustPoll(t, m, b1, true, "b1, under its part, after a0's release")
	mustPoll(t, m, a3, false, "a3, a borrower, with 5 bytes free")
	b0.release(m)
	mustPoll(t, m, a3, true, "a3 once b0's 10 came free")
	for _, f := range []*simFrame{a1, a2, a3, b1} {
		f.release(m)
	}
	if m.Reserved() != 0 || len(m.shares) != 0 {
		t.Fatalf("reserved %d, %d active shares after every release", m.Reserved(), len(m.shares))
	}
}

// TestRequestMemorySharesRandom drives random shares reading random frames
// (growing by doubling, as reader.go does) and checks after every step
// that no share deadlocks (each with waiters has a frame growing without
// waiting), that no head that fits the free memory and its share's part is
// left waiting, that the reserved bytes stay within the capacity plus one
// frame per share, and finally that every frame completes.
func TestRequestMemorySharesRandom(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSharesRandom(t, seed) })
	}
}

func runSharesRandom(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 20))
	capacity := int64(20 + rng.IntN(200))
	const chunk = 8
	nShares := 1 + rng.IntN(5)
	var frames []*simFrame
	for s := range nShares {
		for range 1 + rng.IntN(6) {
			frames = append(frames, &simFrame{share: fmt.Sprintf("s%d", s)})
		}
	}
	m := NewMemory(capacity, nil)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (go test ./broker/kafka -run 'TestRequestMemorySharesRandom/^%d$'): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	// step moves frame f on by one action; it reports whether anything
	// changed.
	step := func(f *simFrame, start bool) bool {
		switch {
		case f.w != nil:
			return f.poll(m)
		case f.size == 0:
			if !start {
				return false
			}
			f.size = 1 + rng.Int64N(capacity)
			f.grow(m, min(f.size, chunk))
		case f.r.held < f.size:
			f.grow(m, min(f.size, 2*f.r.held)-f.r.held)
		default:
			f.release(m)
		}
		return true
	}
	check := func() {
		t.Helper()
		for _, f := range frames {
			f.poll(m) // a grant sent is reserved; its frame takes it now
		}
		var total, plain int64
		ods := map[string]int{}
		growing := map[string]bool{}
		for _, f := range frames {
			total += f.r.held
			if f.r.ownsOD {
				ods[f.share]++
				growing[f.share] = growing[f.share] || (f.w == nil && f.r.overdraft) || (f.w == nil && f.r.held == f.size)
			} else {
				plain += f.r.held
			}
		}
		if total != m.Reserved() {
			fail("frames hold %d, memory reserved %d", total, m.Reserved())
		}
		if plain > capacity {
			fail("%d bytes reserved without an overdraft, capacity %d", plain, capacity)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		g := m.guaranteedLocked()
		for name, s := range m.shares {
			if ods[name] > 1 {
				fail("share %s: %d frames hold its overdraft", name, ods[name])
			}
			if len(s.waiters) == 0 {
				continue
			}
			if !growing[name] {
				fail("share %s waits with no frame of it growing: deadlock", name)
			}
			if h := s.waiters[0].n; m.used+h <= capacity && s.used+h <= g {
				fail("share %s: head of %d bytes fits (reserved %d of %d, share holds %d of its %d) and waits", name, h, m.used, capacity, s.used, g)
			}
		}
	}
	for range 2000 {
		step(frames[rng.IntN(len(frames))], true)
		check()
	}
	// Drain: no new frames; every frame must complete.
	for round := 0; ; round++ {
		moved, busy := false, false
		for _, f := range frames {
			busy = busy || f.size != 0
			if step(f, false) {
				moved = true
				check()
			}
		}
		if !busy {
			break
		}
		if !moved || round > 100000 {
			fail("no frame can move: deadlock; reserved %d", m.Reserved())
		}
	}
	if m.Reserved() != 0 || len(m.shares) != 0 {
		fail("reserved %d, %d active shares at the end", m.Reserved(), len(m.shares))
	}
}

// TestRecvMeter: the rate is measured over windows of running time; time
// spent waiting for memory (paused) does not count; a window with enough
// bytes starts the next.
func TestRecvMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	slow := 0
	// An hour-long window: its real timer never fires during the test.
	m := newRecvMeter(1, time.Hour, func() time.Time { return now }, func() { slow++ })
	defer m.stop()
	at := func(d time.Duration) time.Time { now = t0.Add(d); return now }
	check := func(d time.Duration, wantSlow bool, wantNext time.Duration) {
		t.Helper()
		m.mu.Lock()
		s, next := m.checkLocked(at(d))
		m.mu.Unlock()
		if s != wantSlow || next != wantNext {
			t.Fatalf("at %v: slow %v next %v, want %v %v", d, s, next, wantSlow, wantNext)
		}
	}
	m.start()
	m.bytes.Add(100)
	check(30*time.Minute, false, 30*time.Minute)
	at(40 * time.Minute)
	m.pause() // 40 minutes spent
	at(5 * time.Hour)
	m.resume()
	check(5*time.Hour+19*time.Minute, false, time.Minute)
	m.bytes.Add(3600) // 3700 in the window: enough for 1 byte/s
	check(5*time.Hour+20*time.Minute, false, time.Hour)
	m.bytes.Add(10)
	check(6*time.Hour+20*time.Minute, true, 0) // 10 bytes in the next hour
	if slow != 0 {
		t.Fatalf("onSlow called %d times by checkLocked alone", slow)
	}
}

// FuzzFrameReader: any bytes from a connection either read as a sequence of
// whole frames, each exactly what its size announced, or fail; nothing
// stays reserved after a failure or a release, and nothing panics.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 0, 0, 9, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(append([]byte{0, 1, 0, 10}, make([]byte, 65546)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		m := NewMemory(1<<17, nil)
		fr := &Reader{mem: m, br: bufio.NewReader(bytes.NewReader(in)), max: 1 << 17}
		rest := in
		for {
			frame, r, err := fr.Next(context.Background(), "fuzz")
			if err != nil {
				if got := m.Reserved(); got != 0 {
					t.Fatalf("a failed read left %d bytes reserved", got)
				}
				return
			}
			n := int(binary.BigEndian.Uint32(rest))
			if !bytes.Equal(frame, rest[4:4+n]) || r.held != int64(n) {
				t.Fatalf("frame of %d bytes (held %d), want the %d announced", len(frame), r.held, n)
			}
			rest = rest[4+n:]
			m.Release(&r)
			if got := m.Reserved(); got != 0 {
				t.Fatalf("%d bytes reserved after release", got)
			}
		}
	})
}
