package netconn

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

var reasons = Reasons{MaxConnections: "max", MaxPerIP: "per-ip"}

func TestLimiterCountsInAllAndPerIP(t *testing.T) {
	l := NewLimiter(3, 2, reasons)
	for i, want := range []struct{ ip, refused string }{
		{"a", ""}, {"a", ""}, {"a", "per-ip"}, {"b", ""}, {"c", "max"},
	} {
		if got := l.Admit(want.ip); got != want.refused {
			t.Fatalf("admit %d (%s) = %q, want %q", i, want.ip, got, want.refused)
		}
	}
	l.Leave("a")
	if got := l.Admit("c"); got != "" {
		t.Fatalf("admit after a leave = %q, want admitted", got)
	}
	if got := l.Admit("a"); got != "max" {
		t.Fatalf("admit at the total = %q, want max", got)
	}
	unbounded := NewLimiter(10, 0, reasons)
	for range 5 {
		if got := unbounded.Admit("a"); got != "" {
			t.Fatalf("maxPerIP 0 refused: %q", got)
		}
	}
}

func TestRemoteIP(t *testing.T) {
	if got := RemoteIP(&net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 9092}); got != "10.0.0.7" {
		t.Fatalf("TCP addr: %q", got)
	}
	if got := RemoteIP(&net.UnixAddr{Name: "sock", Net: "unix"}); got != "sock" {
		t.Fatalf("unix addr: %q", got)
	}
}

func TestIdleReaderClosesOnlyAnIdleConnection(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	act := NewActivity(time.Now())
	act.Started() // a request in flight: not idle however long the read waits
	r := NewIdleReader(server, 20*time.Millisecond, act)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("read with a request in flight ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	act.Finished(time.Now())
	select {
	case err := <-done:
		if !errors.Is(err, ErrIdle) {
			t.Fatalf("read after the answer = %v, want ErrIdle", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed within 5s")
	}
}

func TestPeekedReadsThePeekedBytesFirst(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	go func() {
		_, _ = client.Write([]byte("GET / rest"))
		_ = client.Close()
	}()
	br := bufio.NewReaderSize(server, 16)
	if _, err := br.Peek(1); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(&Peeked{Conn: server, R: br})
	if err != nil || string(got) != "GET / rest" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestCloseHookRunsOnce(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	n := 0
	c := &CloseHook{Conn: server, OnClose: func() { n++ }}
	_ = c.Close()
	_ = c.Close()
	if n != 1 {
		t.Fatalf("OnClose ran %d times, want 1", n)
	}
}

func TestQueueHandsOverUntilClosed(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	q := NewQueue(addr)
	if q.Addr() != addr {
		t.Fatalf("Addr = %v", q.Addr())
	}
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	put := make(chan bool, 1)
	go func() { put <- q.Put(server) }()
	c, err := q.Accept()
	if err != nil || c != server {
		t.Fatalf("Accept = %v, %v", c, err)
	}
	select {
	case ok := <-put:
		if !ok {
			t.Fatal("Put of an accepted connection = false")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Put did not return within 5s")
	}
	_ = q.Close()
	_ = q.Close()
	if q.Put(server) {
		t.Fatal("Put after Close = true")
	}
	if _, err := q.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
	if !strings.Contains(q.Addr().String(), "127.0.0.1") {
		t.Fatalf("Addr after Close = %v", q.Addr())
	}
}
