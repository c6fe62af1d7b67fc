package replybuf

import "testing"

func TestClasses(t *testing.T) {
	for _, n := range []int{0, 1, Min, Max + 1} {
		if b := Get(n); b != nil {
			t.Errorf("Get(%d): a pooled buffer of %d, want none (kept by the connection or allocated alone)", n, cap(*b))
		}
	}
	for _, n := range []int{Min + 1, 3 << 20, 4 << 20, 4<<20 + 1, Max} {
		b := Get(n)
		if b == nil || cap(*b) < n || len(*b) != 0 {
			t.Fatalf("Get(%d): %v, want an empty buffer of capacity at least %d", n, b, n)
		}
		if c := cap(*b); c > 2*n && c > 2<<20 {
			t.Errorf("Get(%d): capacity %d, more than twice what was asked", n, c)
		}
		// A used buffer comes back empty, in a class it fills.
		*b = append(*b, make([]byte, n)...)
		Put(b)
		if again := Get(n); again == nil || cap(*again) < n || len(*again) != 0 {
			t.Fatalf("Get(%d) after a put: %v", n, again)
		}
	}
	// A buffer whose capacity is not a power of two goes to the class
	// below it, so a later taker still has room.
	odd := make([]byte, 0, 3<<20)
	Put(&odd)
	for range 4 {
		if b := Get(2 << 20); cap(*b) < 2<<20 {
			t.Fatalf("a 2 MiB taker got %d", cap(*b))
		}
		if b := Get(4 << 20); cap(*b) < 4<<20 {
			t.Fatalf("a 4 MiB taker got %d", cap(*b))
		}
	}
}
