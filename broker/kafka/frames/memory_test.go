package frames

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// growAsync grows r by n on another goroutine; the result arrives on the
// channel.
func growAsync(m *Memory, r *Reservation, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.grow(context.Background(), r, n) }()
	return done
}

// waitQueued polls until m has n waiters.
func waitQueued(t *testing.T, m *Memory, n int) {
	t.Helper()
	brokertest.Eventually(t, 10*time.Second, fmt.Sprintf("%d waiters", n), func() bool {
		return m.waiting() == n
	})
}

// waiting counts m's waiters over every share.
func (m *Memory) waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.shares {
		n += len(s.waiters)
	}
	return n
}

func mustGranted(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted", what)
	}
}

func mustWaiting(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: granted (%v) while the budget is spent", what, err)
	default:
	}
}

// TestRequestMemoryOrder: grants that fit are immediate; a frame that does
// not fit takes the overdraft; while it is taken everyone waits in arrival
// order, even a small request that would fit.
func TestRequestMemoryOrder(t *testing.T) {
	m := NewMemory(100, nil)
	var a, b, c, d Reservation
	mustGranted(t, "a 60", growAsync(m, &a, 60))
	mustGranted(t, "b 50 (overdraft)", growAsync(m, &b, 50))
	if !b.overdraft || m.Reserved() != 110 {
		t.Fatalf("b overdraft %v, reserved %d; want the overdraft and 110", b.overdraft, m.Reserved())
	}
	cDone := growAsync(m, &c, 30)
	waitQueued(t, m, 1)
	dDone := growAsync(m, &d, 1)
	waitQueued(t, m, 2)
	m.read(&b) // b's frame is complete: the overdraft is free, but 110 > 100
	mustWaiting(t, "c", cDone)
	mustWaiting(t, "d", dDone)
	m.Release(&b)
	mustGranted(t, "c after b's release", cDone)
	mustGranted(t, "d after c", dDone)
	for _, r := range []*Reservation{&a, &c, &d} {
		m.Release(r)
	}
	if got := m.Reserved(); got != 0 {
		t.Fatalf("reserved %d after every release", got)
	}
}

// TestRequestMemoryHoldAndWait: two frames that each hold part of a spent
// budget and want more would wait for each other forever; the overdraft lets
// one finish, and its release lets the other go on.
func TestRequestMemoryHoldAndWait(t *testing.T) {
	m := NewMemory(100, nil)
	var a, b Reservation
	mustGranted(t, "a 60", growAsync(m, &a, 60))
	mustGranted(t, "b 40", growAsync(m, &b, 40))
	mustGranted(t, "a +30 by the overdraft", growAsync(m, &a, 30))
	bDone := growAsync(m, &b, 30)
	waitQueued(t, m, 1)
	mustGranted(t, "a +10 while it holds the overdraft", growAsync(m, &a, 10))
	mustWaiting(t, "b", bDone)
	m.read(&a)
	m.Release(&a)
	mustGranted(t, "b after a", bDone)
	m.Release(&b)
	if got := m.Reserved(); got != 0 {
		t.Fatalf("reserved %d after every release", got)
	}
}

// TestRequestMemoryCancel: a waiter whose context ends leaves the queue and
// holds nothing.
func TestRequestMemoryCancel(t *testing.T) {
	m := NewMemory(100, nil)
	var a, b, c Reservation
	mustGranted(t, "a 100", growAsync(m, &a, 100))
	mustGranted(t, "b 1 by the overdraft", growAsync(m, &b, 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.grow(ctx, &c, 50) }()
	waitQueued(t, m, 1)
	cancel()
	if err := brokertest.RecvWithin(t, done, 10*time.Second, "grow to return after its context ended"); err == nil {
		t.Fatal("grow returned nil after its context ended")
	}
	m.Release(&c)
	m.Release(&b)
	m.Release(&a)
	if got := m.Reserved(); got != 0 || m.waiting() != 0 || len(m.shares) != 0 {
		t.Fatalf("reserved %d, %d waiters, %d active shares after every release", got, m.waiting(), len(m.shares))
	}
}

// TestReadFrameReservesAsBytesArrive: a frame announced at 900 KiB of which
// 100 KiB arrived holds at most twice that, not 900 KiB.
func TestReadFrameReservesAsBytesArrive(t *testing.T) {
	const size, sent = 900 << 10, 100 << 10
	m := NewMemory(1<<20, nil)
	pr, pw := io.Pipe()
	type result struct {
		frame []byte
		res   Reservation
		err   error
	}
	done := make(chan result, 1)
	go func() {
		fr := &Reader{mem: m, br: bufio.NewReaderSize(pr, 64<<10), max: 1 << 20}
		f, r, err := fr.Next(context.Background(), "t")
		done <- result{f, r, err}
	}()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i)
	}
	if _, err := pw.Write(binary.BigEndian.AppendUint32(nil, size)); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write(body[:sent]); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "the sent bytes reserved", func() bool { return m.Reserved() >= sent })
	if got := m.Reserved(); got > 2*sent {
		t.Fatalf("%d bytes of a %d-byte frame arrived and %d are reserved; want at most %d", sent, size, got, 2*sent)
	}
	if _, err := pw.Write(body[sent:]); err != nil {
		t.Fatal(err)
	}
	r := brokertest.RecvWithin(t, done, 10*time.Second, "readFrame to return the whole frame")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(r.frame) != string(body) || r.res.held != size || m.Reserved() != size {
		t.Fatalf("frame of %d bytes (equal: %v), held %d, reserved %d", len(r.frame), string(r.frame) == string(body), r.res.held, m.Reserved())
	}
	m.Release(&r.res)
	if got := m.Reserved(); got != 0 {
		t.Fatalf("reserved %d after release", got)
	}
}

func TestReadFrameLimits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		input []byte
	}{
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{"huge size", binary.BigEndian.AppendUint32(nil, 1<<31-1)},
		{"tiny size", binary.BigEndian.AppendUint32(nil, 3)},
		{"truncated body", append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...)},
		{"truncated past the first chunk", append(binary.BigEndian.AppendUint32(nil, 1<<19), make([]byte, frameChunk+10)...)},
		{"larger than the request memory", append(binary.BigEndian.AppendUint32(nil, 1<<20-1), make([]byte, 1<<20-1)...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMemory(1<<20-2, nil)
			if _, _, err := (&Reader{mem: mem, br: bufio.NewReader(bytes.NewReader(tt.input)), max: 1 << 20}).Next(context.Background(), "t"); !errors.Is(err, ErrFrame) {
				t.Fatalf("readFrame = %v, want ErrFrame", err)
			}
			if got := mem.Reserved(); got != 0 {
				t.Fatalf("a refused frame left %d bytes reserved", got)
			}
		})
	}
}
