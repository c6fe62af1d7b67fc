package freeport

import (
	"net"
	"testing"
)

// TestAddrNeverRepeats asks for many addresses in a row: the kernel often
// hands a just-closed port out again, which Addr must not pass on.
func TestAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		a := Must(t)
		if seen[a] {
			t.Fatalf("address %s handed out twice", a)
		}
		seen[a] = true
	}
	// Each address is usable.
	ln, err := net.Listen("tcp", Must(t))
	if err != nil {
		t.Fatalf("listen on a free address: %v", err)
	}
	_ = ln.Close()
}
