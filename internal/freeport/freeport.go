// Package freeport hands tests 127.0.0.1 addresses whose ports were free a
// moment ago and that no earlier call in this process has handed out.
//
// Invariant: within one process, Addr never returns the same port twice.
//
// Asking the kernel for port 0 and closing the listener is the usual trick,
// but the kernel may give the same port to the very next such request: two
// calls in a row (an etcd client and peer port, a broker's Kafka and HTTP
// port) then name one port, and the second listener fails with "address
// already in use". CI met exactly that. Remembering every port handed out
// closes the in-process case; another process taking the port between Addr
// and the caller's own Listen is still possible, and is as rare as it was.
package freeport

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

var (
	mu     sync.Mutex
	issued = map[int]bool{}
)

// Addr is a "127.0.0.1:port" address with a port free a moment ago and
// never returned before by this process.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("freeport: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close() // only its port was wanted
		if issued[port] {
			continue
		}
		issued[port] = true
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
	}
	return "", fmt.Errorf("freeport: no unused port after 1000 tries")
}

// Port is Addr's port number.
func Port() (int, error) {
	a, err := Addr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}

// TB is the part of testing.TB that Must needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Must is Addr for a test: a failure ends the test.
func Must(t TB) string {
	t.Helper()
	a, err := Addr()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return a
}
