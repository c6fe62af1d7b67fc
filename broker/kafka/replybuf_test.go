package kafka

import "testing"

func TestReplyBufferClasses(t *testing.T) {
	for _, n := range []int{0, 1, maxKeptReplyBuffer, maxPooledReply + 1} {
		if b := getReplyBuffer(n); b != nil {
			t.Errorf("getReplyBuffer(%d): a pooled buffer of %d, want none (kept by the connection or allocated alone)", n, cap(*b))
		}
	}
	for _, n := range []int{maxKeptReplyBuffer + 1, 3 << 20, 4 << 20, 4<<20 + 1, maxPooledReply} {
		b := getReplyBuffer(n)
		if b == nil || cap(*b) < n || len(*b) != 0 {
			t.Fatalf("getReplyBuffer(%d): %v, want an empty buffer of capacity at least %d", n, b, n)
		}
		if c := cap(*b); c > 2*n && c > 2<<20 {
			t.Errorf("getReplyBuffer(%d): capacity %d, more than twice what was asked", n, c)
		}
		// A used buffer comes back empty, in a class it fills.
		*b = append(*b, make([]byte, n)...)
		putReplyBuffer(b)
		if again := getReplyBuffer(n); again == nil || cap(*again) < n || len(*again) != 0 {
			t.Fatalf("getReplyBuffer(%d) after a put: %v", n, again)
		}
	}
	// A buffer whose capacity is not a power of two goes to the class
	// below it, so a later taker still has room.
	odd := make([]byte, 0, 3<<20)
	putReplyBuffer(&odd)
	for range 4 {
		if b := getReplyBuffer(2 << 20); cap(*b) < 2<<20 {
			t.Fatalf("a 2 MiB taker got %d", cap(*b))
		}
		if b := getReplyBuffer(4 << 20); cap(*b) < 4<<20 {
			t.Fatalf("a 4 MiB taker got %d", cap(*b))
		}
	}
}
