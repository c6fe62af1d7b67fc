package s3_test

// Error paths that a healthy gateway does not produce, driven by a scripted
// HTTP server on 127.0.0.1: throttling, 5xx, bodies cut off mid-read.

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
)

// scripted serves requests with the handlers in turn, repeating the last.
func scripted(t *testing.T, handlers ...http.HandlerFunc) (*s3.Store, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := int(n.Add(1)) - 1
		handlers[min(i, len(handlers)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Endpoint: srv.URL, Region: "us-east-1"},
		objstore.Options{AccessKey: "k", SecretKey: "s", Timeout: 10 * time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return s, &n
}

func s3Error(status int, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>scripted</Message></Error>`)
	}
}

func ok(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("ETag", `"etag"`)
		_, _ = io.WriteString(w, body)
	}
}

// cut promises the whole body and sends half of it before hanging up.
func cut(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

func TestRetriesThrottling(t *testing.T) {
	s, n := scripted(t, s3Error(503, "SlowDown"), s3Error(500, "InternalError"), ok(""))
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put after a SlowDown and a 500 = %v, want success on the third attempt", err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("requests = %d, want 3", got)
	}
}

func TestAttemptsBounded(t *testing.T) {
	s, n := scripted(t, s3Error(503, "SlowDown"))
	err := s.Put(t.Context(), "k", []byte("v"))
	if err == nil || !objstore.IsRetriable(err) {
		t.Fatalf("Put against constant throttling = %v, want a retriable error", err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("requests = %d, want MaxAttempts = 3", got)
	}
}

func TestFinalErrorNotRetried(t *testing.T) {
	s, n := scripted(t, s3Error(403, "AccessDenied"))
	_, err := s.Get(t.Context(), "k", 0, -1)
	if err == nil || objstore.IsRetriable(err) || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get denied = %v, want a final error", err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("requests = %d, want 1", got)
	}
}

func TestCutBodyRetried(t *testing.T) {
	const body = "0123456789abcdef"
	s, n := scripted(t, cut(body), ok(body))
	got, err := s.Get(t.Context(), "k", 0, -1)
	if err != nil || string(got) != body {
		t.Fatalf("Get after a cut body = %q, %v; want %q", got, err, body)
	}
	if n.Load() != 2 {
		t.Fatalf("requests = %d, want 2", n.Load())
	}
}

func TestCutBodyEveryTime(t *testing.T) {
	s, n := scripted(t, cut("0123456789abcdef"))
	got, err := s.Get(t.Context(), "k", 0, -1)
	if err == nil || !objstore.IsRetriable(err) {
		t.Fatalf("Get with every body cut = %d bytes, %v; want a retriable error", len(got), err)
	}
	if n.Load() != 3 {
		t.Fatalf("requests = %d, want MaxAttempts = 3", n.Load())
	}
}

func TestNoSuchKeyOnDelete(t *testing.T) {
	s, _ := scripted(t, s3Error(404, "NoSuchKey"))
	if err := s.Delete(t.Context(), "k"); err != nil {
		t.Fatalf("Delete answered NoSuchKey = %v, want success", err)
	}
	_, err := s.Get(t.Context(), "k", 0, -1)
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get answered NoSuchKey = %v, want ErrNotFound", err)
	}
}

func TestNoSuchBucket(t *testing.T) {
	s, _ := scripted(t, s3Error(404, "NoSuchBucket"))
	_, err := s.Get(t.Context(), "k", 0, -1)
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get answered NoSuchBucket = %v, want an error that is not ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "k"); err == nil {
		t.Fatal("Delete answered NoSuchBucket succeeded")
	}
}

// TestVersityDirectoryRace: Versity's gateway answers a PUT that raced a
// DELETE emptying its directory with 409 ExistingObjectIsDirectory; it is
// retried.
func TestVersityDirectoryRace(t *testing.T) {
	s, n := scripted(t, s3Error(409, "ExistingObjectIsDirectory"), ok(""))
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put after the race = %v, want success on the second attempt", err)
	}
	if n.Load() != 2 {
		t.Fatalf("requests = %d, want 2", n.Load())
	}
}
