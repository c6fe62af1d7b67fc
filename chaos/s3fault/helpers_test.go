package s3fault

// Test doubles: a small in-memory S3-ish upstream on httptest that records
// every request it receives, a proxy in front of it, and a plain HTTP
// client. No sleeps: waits poll until a deadline.

import (
	"bytes"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor is how long any single expected event may take before a test fails.
const waitFor = 10 * time.Second

// seen is one request as the upstream received it.
type seen struct {
	Method     string
	RequestURI string
	Host       string
	Header     http.Header
	BodyLen    int64
	Chunked    bool
}

// upstream stores objects by path (/bucket/key), serves them with Range
// support, and records what it received.
type upstream struct {
	*httptest.Server
	// onBody, if set, wraps the body of each PUT before it is read.
	onBody func(io.Reader) io.Reader

	mu      sync.Mutex
	objects map[string][]byte // guarded by mu
	reqs    []seen            // guarded by mu: every request, once handled
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{objects: make(map[string][]byte)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	s := seen{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(),
		Chunked: len(r.TransferEncoding) > 0}
	defer func() {
		u.mu.Lock()
		u.reqs = append(u.reqs, s)
		u.mu.Unlock()
	}()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && key == "":
		u.mu.Lock()
		var names []string
		for k := range u.objects {
			if strings.HasPrefix(k, "/"+bucket+"/") {
				names = append(names, strings.TrimPrefix(k, "/"+bucket+"/"))
			}
		}
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		_ = xml.NewEncoder(w).Encode(struct {
			XMLName xml.Name `xml:"ListBucketResult"`
			Keys    []string `xml:"Contents>Key"`
		}{Keys: names})
	case r.Method == http.MethodPut:
		body := io.Reader(r.Body)
		if u.onBody != nil {
			body = u.onBody(body)
		}
		b, err := io.ReadAll(body)
		s.BodyLen = int64(len(b))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.objects[r.URL.Path] = b
		u.mu.Unlock()
		w.Header().Set("ETag", `"etag"`)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		u.mu.Lock()
		b, ok := u.objects[r.URL.Path]
		u.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `<Error><Code>NoSuchKey</Code></Error>`)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	case r.Method == http.MethodDelete:
		u.mu.Lock()
		delete(u.objects, r.URL.Path)
		u.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

func (u *upstream) object(path string) ([]byte, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.objects[path]
	return b, ok
}

func (u *upstream) put(path string, b []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.objects[path] = b
}

func (u *upstream) received() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func newProxy(t *testing.T, upstreamURL string, seed uint64) *Proxy {
	t.Helper()
	p, err := New(Config{Upstream: upstreamURL, Seed: seed})
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

func setFaults(t *testing.T, p *Proxy, f Faults) {
	t.Helper()
	if err := p.SetFaults(f); err != nil {
		t.Fatalf("set faults: %v", err)
	}
}

// newClient is a plain HTTP client that never uses an environment proxy.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

// do sends one request; a non-nil body is sent with its length.
func do(t *testing.T, c *http.Client, method, url string, body []byte, header map[string]string) (*http.Response, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return c.Do(req)
}

// mustDo sends one request and reads its whole body.
func mustDo(t *testing.T, c *http.Client, method, url string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	resp, err := do(t, c, method, url, body, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, b
}

// randomBytes returns n bytes from a fixed generator.
func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitFor, what)
		}
		time.Sleep(time.Millisecond)
	}
}
