package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type gateKey struct{}

// TestFillGate: a Get's fill passes the gate with the Get's context values
// and gives it back with the bytes it read; a refused gate fails the Get
// and nothing is cached; a prefetch never passes it.
func TestFillGate(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var returned []int
	refuse := false
	c, err := New(Config{MaxBytes: 1 << 20, FillGate: func(ctx context.Context) (func(int), error) {
		mu.Lock()
		defer mu.Unlock()
		who, _ := ctx.Value(gateKey{}).(string)
		seen = append(seen, who)
		if refuse {
			return nil, errors.New("lane closed")
		}
		return func(n int) {
			mu.Lock()
			returned = append(returned, n)
			mu.Unlock()
		}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), gateKey{}, "tenant-a"), 5*time.Second)
	defer cancel()
	val, err := c.Get(ctx, "k1", func(context.Context) ([]byte, error) { return []byte("12345"), nil })
	if err != nil || string(val) != "12345" {
		t.Fatalf("Get = %q, %v", val, err)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0] != "tenant-a" || len(returned) != 1 || returned[0] != 5 {
		t.Errorf("gate saw %v and got back %v, want [tenant-a] and [5]", seen, returned)
	}
	refuse = true
	mu.Unlock()
	if _, err := c.Get(ctx, "k2", func(context.Context) ([]byte, error) { return []byte("x"), nil }); err == nil || !strings.Contains(err.Error(), "lane closed") {
		t.Errorf("Get through a refusing gate = %v, want its error", err)
	}
	// A hit does not pass the gate.
	if _, err := c.Get(ctx, "k1", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	if r := c.prefetch("k3", func(context.Context) ([]byte, error) { return []byte("p"), nil }, func() { close(done) }); r != prefetchStarted {
		t.Fatalf("prefetch = %v", r)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("prefetch did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Errorf("gate passed %d times (%v), want 2: the hit and the prefetch pass it by", len(seen), seen)
	}
}
