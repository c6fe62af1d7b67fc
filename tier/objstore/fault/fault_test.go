package fault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

func TestConformancePassThrough(t *testing.T) {
	storetest.Run(t, func(*testing.T) objstore.Store {
		return fault.New(mem.New(), fault.Config{Seed: 1})
	})
}

func TestConformanceWithLatency(t *testing.T) {
	storetest.Run(t, func(*testing.T) objstore.Store {
		f := fault.New(mem.New(), fault.Config{Seed: 2})
		f.SetAll(fault.Faults{Latency: 50 * time.Microsecond, Jitter: 100 * time.Microsecond})
		return f
	})
}

// TestKinds injects each kind of fault into every call of one operation and
// checks what the caller sees, what reached the inner store, and the count.
func TestKinds(t *testing.T) {
	body := []byte("0123456789")
	tests := []struct {
		name   string
		op     fault.Op
		faults fault.Faults
		kind   fault.Kind
		status int
		code   string
		stored bool // whether a Put reached the inner store
	}{
		{"server error on put", fault.OpPut, fault.Faults{ServerErrorRate: 1}, fault.KindServerError, 500, "InternalError", false},
		{"throttle on put", fault.OpPut, fault.Faults{ThrottleRate: 1}, fault.KindThrottle, 503, "SlowDown", false},
		{"lost response on put", fault.OpPut, fault.Faults{LostResponseRate: 1}, fault.KindLostResponse, 500, "InternalError", true},
		{"server error on get", fault.OpGet, fault.Faults{ServerErrorRate: 1}, fault.KindServerError, 500, "InternalError", true},
		{"throttle on head", fault.OpHead, fault.Faults{ThrottleRate: 1}, fault.KindThrottle, 503, "SlowDown", true},
		{"server error on list", fault.OpList, fault.Faults{ServerErrorRate: 1}, fault.KindServerError, 500, "InternalError", true},
		{"throttle on delete", fault.OpDelete, fault.Faults{ThrottleRate: 1}, fault.KindThrottle, 503, "SlowDown", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inner := mem.New()
			f := fault.New(inner, fault.Config{Seed: 3})
			if tc.op != fault.OpPut {
				if err := f.Put(t.Context(), "k", body); err != nil {
					t.Fatal(err)
				}
			}
			f.Set(tc.op, tc.faults)
			err := call(t.Context(), f, tc.op)
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Kind != tc.kind || fe.Op != tc.op {
				t.Fatalf("%s = %v, want an injected %s", tc.op, err, tc.kind)
			}
			if !objstore.IsRetriable(err) || fe.HTTPStatusCode() != tc.status || fe.ErrorCode() != tc.code {
				t.Fatalf("error %v: retriable %v, status %d, code %q; want retriable, %d, %q",
					err, objstore.IsRetriable(err), fe.HTTPStatusCode(), fe.ErrorCode(), tc.status, tc.code)
			}
			if got := f.Counts(); len(got) != 1 || got[tc.kind] != 1 {
				t.Fatalf("Counts = %v, want one %s", got, tc.kind)
			}
			_, herr := inner.Head(t.Context(), "k")
			if stored := herr == nil; stored != tc.stored {
				t.Fatalf("object in the inner store: %v (%v), want %v", stored, herr, tc.stored)
			}
		})
	}
}

// call runs op once against s with key "k".
func call(ctx context.Context, s objstore.Store, op fault.Op) error {
	switch op {
	case fault.OpPut:
		return s.Put(ctx, "k", []byte("0123456789"))
	case fault.OpGet:
		_, err := s.Get(ctx, "k", 0, -1)
		return err
	case fault.OpHead:
		_, err := s.Head(ctx, "k")
		return err
	case fault.OpList:
		return s.List(ctx, "", func(objstore.Info) error { return nil })
	case fault.OpDelete:
		return s.Delete(ctx, "k")
	}
	panic(fmt.Sprintf("unknown op %v", op))
}

func TestTruncate(t *testing.T) {
	f := fault.New(mem.New(), fault.Config{Seed: 4})
	body := bytes.Repeat([]byte("abcdefgh"), 512)
	if err := f.Put(t.Context(), "k", body); err != nil {
		t.Fatal(err)
	}
	f.Set(fault.OpGet, fault.Faults{TruncateRate: 1})
	for range 20 {
		got, err := f.Get(t.Context(), "k", 100, 1000)
		if err != nil || len(got) >= 1000 || !bytes.Equal(got, body[100:100+len(got)]) {
			t.Fatalf("truncated Get = %d bytes, %v; want a strict prefix of the range and no error", len(got), err)
		}
	}
	// An empty result has nothing to cut, and is not counted.
	if got, err := f.Get(t.Context(), "k", int64(len(body)), -1); err != nil || len(got) != 0 {
		t.Fatalf("Get at the end = %d bytes, %v", len(got), err)
	}
	if n := f.Count(fault.KindTruncate); n != 20 {
		t.Fatalf("truncations counted = %d, want 20", n)
	}
}

func TestTimeout(t *testing.T) {
	t.Run("until the deadline", func(t *testing.T) {
		f := fault.New(mem.New(), fault.Config{Seed: 5, MaxBlock: time.Hour})
		f.Set(fault.OpHead, fault.Faults{TimeoutRate: 1})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := f.Head(ctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !objstore.IsRetriable(err) {
			t.Fatalf("Head = %v, want a retriable deadline error", err)
		}
		if n := f.Count(fault.KindTimeout); n != 1 {
			t.Fatalf("timeouts counted = %d, want 1", n)
		}
	})
	t.Run("no deadline: MaxBlock", func(t *testing.T) {
		f := fault.New(mem.New(), fault.Config{Seed: 5, MaxBlock: 10 * time.Millisecond})
		f.Set(fault.OpGet, fault.Faults{TimeoutRate: 1})
		_, err := f.Get(context.Background(), "k", 0, -1)
		if !errors.Is(err, syscall.ETIMEDOUT) || !objstore.IsRetriable(err) {
			t.Fatalf("Get = %v, want a retriable timeout", err)
		}
	})
	t.Run("cancelled while blocked", func(t *testing.T) {
		f := fault.New(mem.New(), fault.Config{Seed: 5, MaxBlock: time.Hour})
		f.Set(fault.OpPut, fault.Faults{TimeoutRate: 1})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.Put(ctx, "k", nil) }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || objstore.IsRetriable(err) {
				t.Fatalf("Put = %v, want a final cancellation", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Put blocked for an hour ignored its cancellation")
		}
	})
}

func TestLatencyRespectsContext(t *testing.T) {
	f := fault.New(mem.New(), fault.Config{Seed: 6})
	f.Set(fault.OpPut, fault.Faults{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := f.Put(ctx, "k", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put under an hour of latency = %v, want the deadline", err)
	}
	if _, err := f.Inner().Head(t.Context(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a Put that never ran stored its object: %v", err)
	}
	if n := f.Count(fault.KindLatency); n != 1 {
		t.Fatalf("latency counted = %d, want 1", n)
	}
}

func TestDown(t *testing.T) {
	f := fault.New(mem.New(), fault.Config{Seed: 7})
	if err := f.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	f.SetDown(true)
	for op := fault.OpPut; op <= fault.OpDelete; op++ {
		err := call(t.Context(), f, op)
		if !errors.Is(err, syscall.ECONNREFUSED) || !objstore.IsRetriable(err) {
			t.Errorf("%s while down = %v, want a retriable refused connection", op, err)
		}
	}
	if n := f.Count(fault.KindDown); n != 5 {
		t.Fatalf("down faults counted = %d, want 5", n)
	}
	f.SetDown(false)
	for op := fault.OpPut; op <= fault.OpDelete; op++ {
		if err := call(t.Context(), f, op); err != nil {
			t.Errorf("%s after coming back up: %v", op, err)
		}
	}
}

// TestSeed: the same seed and the same calls inject the same faults, and a
// rate is roughly honoured.
func TestSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		f := fault.New(mem.New(), fault.Config{Seed: seed})
		f.Set(fault.OpPut, fault.Faults{ServerErrorRate: 0.3})
		var failed []bool
		for i := range 1000 {
			failed = append(failed, f.Put(t.Context(), fmt.Sprintf("k%d", i), nil) != nil)
		}
		if n := f.Count(fault.KindServerError); n < 200 || n > 400 {
			t.Errorf("seed %d: %d server errors in 1000 calls at rate 0.3", seed, n)
		}
		return failed
	}
	a, b, c := run(42), run(42), run(43)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same seed injected different faults")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("different seeds injected the same 1000 faults")
	}
}

func TestNames(t *testing.T) {
	if fault.OpList.String() != "list" || fault.Op(99).String() != "op(99)" {
		t.Fatalf("Op names: %v %v", fault.OpList, fault.Op(99))
	}
	if fault.KindLostResponse.String() != "lost-response" || fault.Kind(-1).String() != "kind(-1)" {
		t.Fatalf("Kind names: %v %v", fault.KindLostResponse, fault.Kind(-1))
	}
}

// TestMultipartFaults: multipart calls reach the inner store, and take the
// faults of their own operations.
func TestMultipartFaults(t *testing.T) {
	inner := mem.New()
	s := fault.New(inner, fault.Config{Seed: 1})
	ctx := t.Context()
	id, err := s.CreateMultipart(ctx, "large/t/x")
	if err != nil {
		t.Fatal(err)
	}
	s.Set(fault.OpUploadPart, fault.Faults{ServerErrorRate: 1})
	if _, err := s.UploadPart(ctx, "large/t/x", id, 1, strings.NewReader("abc"), 3); err == nil || !objstore.IsRetriable(err) {
		t.Fatalf("UploadPart with a server error: %v", err)
	}
	s.Set(fault.OpUploadPart, fault.Faults{})
	e, err := s.UploadPart(ctx, "large/t/x", id, 1, strings.NewReader("abc"), 3)
	if err != nil {
		t.Fatal(err)
	}
	s.Set(fault.OpCompleteMultipart, fault.Faults{LostResponseRate: 1})
	if err := s.CompleteMultipart(ctx, "large/t/x", id, []objstore.Part{{Number: 1, ETag: e}}); err == nil {
		t.Fatal("a lost response to Complete succeeded")
	}
	if b, err := inner.Get(ctx, "large/t/x", 0, -1); err != nil || string(b) != "abc" {
		t.Fatalf("after a lost response the object is %q, %v; want it stored", b, err)
	}
	if s.Count(fault.KindServerError) != 1 || s.Count(fault.KindLostResponse) != 1 {
		t.Fatalf("counts %v", s.Counts())
	}
	if _, err := s.PresignUploadPart(ctx, "large/t/x", id, 1, 3, time.Minute); !errors.Is(err, objstore.ErrUnsupported) {
		t.Fatalf("presign through a memory store: %v; want ErrUnsupported", err)
	}
}
