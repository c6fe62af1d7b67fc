package netproxy

// Test servers and helpers: real TCP servers on 127.0.0.1 whose goroutines
// are owned and waited for, and polling with deadlines instead of sleeps.

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor is how long any single expected event may take before a test fails.
const waitFor = 10 * time.Second

// server is a TCP server on a free loopback port running handle for every
// connection; Close stops it and waits for its goroutines.
type server struct {
	ln       net.Listener
	wg       sync.WaitGroup
	received atomic.Int64  // bytes read by echo handlers
	quit     chan struct{} // closed by Close
	once     sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newServer(t *testing.T, handle func(s *server, c net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{ln: ln, conns: make(map[net.Conn]struct{}), quit: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handle(s, c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *server) Addr() string { return s.ln.Addr().String() }

func (s *server) Close() {
	s.once.Do(func() { close(s.quit) })
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// echo copies what it reads back, then passes the end of stream on.
func echo(s *server, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			s.received.Add(int64(n))
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.(*net.TCPConn).CloseWrite()
				// Wait for the client's close before closing ours.
				io.Copy(io.Discard, c)
			}
			return
		}
	}
}

// accepter hands every accepted connection to the test and holds it open
// until the server closes; the test reads and writes it.
func accepter(ch chan<- net.Conn) func(*server, net.Conn) {
	return func(s *server, c net.Conn) {
		select {
		case ch <- c:
		case <-s.quit:
			return
		}
		<-s.quit
	}
}

func newProxy(t *testing.T, upstream string, seed uint64) *Proxy {
	t.Helper()
	p, err := New(Config{Upstream: upstream, Name: t.Name(), Seed: seed})
	if err != nil {
		t.Fatalf("new proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for an event
	}
}

// readFull reads len(want) bytes within waitFor and compares them.
func readFull(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitFor))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d bytes: %v", len(want), err)
	}
	if string(got) != string(want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectClosed reads until the connection fails (reset or end of stream)
// within waitFor; reading anything is an error.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitFor))
	var b [64]byte
	n, err := c.Read(b[:])
	if n > 0 {
		t.Fatalf("read %q from a connection that should be closed", b[:n])
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open: %v", err)
	}
}

// expectRefused dials addr and expects the proxy to reset the connection at
// accept: the reset may already fail the dial, or the first read.
func expectRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		return
	}
	defer c.Close()
	expectClosed(t, c)
}

// expectNothing checks that no byte is readable now. Callers first establish
// (through the proxy's counters) that the bytes were discarded, so the short
// deadline only confirms it and cannot make a passing test flaky.
func expectNothing(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [64]byte
	n, err := c.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing", b[:n], err)
	}
}

// recvWithin receives from ch, failing the test if nothing arrives within
// waitFor: a proxy that never connects upstream or a writer stuck behind it
// fails the test, not the package timeout.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", waitFor, what)
		panic("unreachable")
	}
}
