package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

// watchdog bounds calls that must not hang; it is a liveness bound, far above
// the deadlines under test, not a speed assertion.
const watchdog = 60 * time.Second

func newStore(t *testing.T, srv *s3test.Server, prefix string, opts objstore.Options) *s3.Store {
	t.Helper()
	cfg := s3.Config{Bucket: srv.Bucket, Endpoint: srv.Endpoint, Region: srv.Region}
	if prefix != "" {
		cfg.Prefix = prefix + "/"
	}
	s, err := s3.New(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("s3.New: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return newStore(t, srv, fmt.Sprintf("conformance/%d", n.Add(1)), srv.Options())
	})
}

func TestConformanceWithoutPrefix(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		srv := s3test.Start(t) // a fresh, empty bucket each
		return newStore(t, srv, "", srv.Options())
	})
}

func TestPrefixes(t *testing.T) {
	srv := s3test.Start(t)
	ctx := t.Context()
	a := newStore(t, srv, "tenant/a", srv.Options())
	b := newStore(t, srv, "tenant/b", srv.Options())
	root := newStore(t, srv, "", srv.Options())
	if err := a.Put(ctx, "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, "k", 0, -1); err != nil || string(got) != "a" {
		t.Fatalf("a.Get = %q, %v", got, err)
	}
	if got := list(t, b, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("b.List = %q, want [k]", got)
	}
	if got := list(t, root, ""); !slices.Equal(got, []string{"tenant/a/k", "tenant/b/k"}) {
		t.Fatalf("List without a prefix = %q", got)
	}
}

func list(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.List(t.Context(), prefix, func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

// calls runs every Store method once against s, concurrently, and returns
// their errors by name; it fails the test if any is still running after the
// watchdog.
func calls(t *testing.T, s objstore.Store) map[string]error {
	t.Helper()
	ops := map[string]func(context.Context) error{
		"Put":    func(ctx context.Context) error { return s.Put(ctx, "k", []byte("v")) },
		"Get":    func(ctx context.Context) error { _, err := s.Get(ctx, "k", 0, -1); return err },
		"Head":   func(ctx context.Context) error { _, err := s.Head(ctx, "k"); return err },
		"List":   func(ctx context.Context) error { return s.List(ctx, "", func(objstore.Info) error { return nil }) },
		"Delete": func(ctx context.Context) error { return s.Delete(ctx, "k") },
	}
	type result struct {
		name string
		err  error
	}
	done := make(chan result, len(ops))
	for name, op := range ops {
		go func() { done <- result{name, op(context.Background())} }()
	}
	limit := time.NewTimer(watchdog)
	defer limit.Stop()
	errs := map[string]error{}
	for len(errs) < len(ops) {
		select {
		case r := <-done:
			errs[r.name] = r.err
		case <-limit.C:
			t.Fatalf("calls still running after %v (done: %v): a call hung past its deadline", watchdog, errs)
		}
	}
	return errs
}

// TestStoppedServer: once the service is gone every call fails, retriably,
// within its deadline.
func TestStoppedServer(t *testing.T) {
	srv := s3test.Start(t)
	opts := srv.Options()
	opts.Timeout, opts.MaxAttempts = 3*time.Second, 3
	s := newStore(t, srv, "p", opts)
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for name, err := range calls(t, s) {
		if err == nil || !objstore.IsRetriable(err) || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("%s against a stopped server = %v, want a retriable error", name, err)
		}
	}
}

// TestHungServer: a service that accepts connections and never answers
// cannot hold a call past its deadline.
func TestHungServer(t *testing.T) {
	srv := s3test.Start(t)
	opts := srv.Options()
	opts.Timeout, opts.MaxAttempts = time.Second, 2
	s := newStore(t, srv, "p", opts)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	for name, err := range calls(t, s) {
		if !errors.Is(err, context.DeadlineExceeded) || !objstore.IsRetriable(err) {
			t.Errorf("%s against a hung server = %v, want a retriable deadline error", name, err)
		}
	}
}

// TestLostResponse: a PUT whose response is lost has committed, so the object
// is readable although the caller saw a retriable error.
func TestLostResponse(t *testing.T) {
	srv := s3test.Start(t)
	f := fault.New(newStore(t, srv, "lost", srv.Options()), fault.Config{Seed: 1})
	f.Set(fault.OpPut, fault.Faults{LostResponseRate: 1})
	body := bytes.Repeat([]byte("segment"), 1000)
	err := f.Put(t.Context(), "obj", body)
	if err == nil || !objstore.IsRetriable(err) {
		t.Fatalf("Put with a lost response = %v, want a retriable error", err)
	}
	if n := f.Count(fault.KindLostResponse); n != 1 {
		t.Fatalf("lost responses counted = %d, want 1", n)
	}
	got, err := f.Get(t.Context(), "obj", 0, -1)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get after a lost response = %d bytes, %v; want the object", len(got), err)
	}
	// The caller's retry writes the same bytes again and succeeds.
	f.Set(fault.OpPut, fault.Faults{})
	if err := f.Put(t.Context(), "obj", body); err != nil {
		t.Fatalf("retried Put: %v", err)
	}
}

// TestServiceErrors: errors from the service that are final are not
// retriable and not mistaken for a missing object.
func TestServiceErrors(t *testing.T) {
	srv := s3test.Start(t)
	opts := srv.Options()
	opts.Timeout = 5 * time.Second
	missingBucket, err := s3.New(t.Context(), s3.Config{Bucket: "no-such-bucket", Endpoint: srv.Endpoint, Region: srv.Region}, opts)
	if err != nil {
		t.Fatal(err)
	}
	badKey := opts
	badKey.SecretKey = "wrong"
	badCreds := newStore(t, srv, "p", badKey)
	for _, tc := range []struct {
		name string
		s    objstore.Store
	}{{"missing bucket", missingBucket}, {"wrong secret", badCreds}} {
		t.Run(tc.name, func(t *testing.T) {
			for name, err := range calls(t, tc.s) {
				if err == nil || objstore.IsRetriable(err) || errors.Is(err, objstore.ErrNotFound) {
					t.Errorf("%s = %v, want a final error that is not ErrNotFound", name, err)
				}
			}
		})
	}
}

// TestEnvironmentCredentials: without a key pair in Options the standard AWS
// chain supplies one, as for a sluiced started with AWS_* variables.
func TestEnvironmentCredentials(t *testing.T) {
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	cfg, err := s3.ParseURL(srv.URL("env"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3.New(t.Context(), cfg, objstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put with credentials from the environment: %v", err)
	}
}
