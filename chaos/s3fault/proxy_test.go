package s3fault

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// signed are headers a SigV4 client sends; the proxy must pass them as they are.
var signed = map[string]string{
	"Authorization":        "AWS4-HMAC-SHA256 Credential=AK/20250101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=abc",
	"X-Amz-Date":           "20250101T000000Z",
	"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD",
}

func TestForwardsEverythingWithoutFaults(t *testing.T) {
	up := newUpstream(t)
	p := newProxy(t, up.URL, 1)
	c := newClient(t)
	body := randomBytes(1 << 20)
	// A key whose encoding must survive byte for byte: SigV4 signs the path as sent.
	obj := p.URL() + "/bucket/dir/a%20b+c%2Bd~e"

	resp, _ := mustDo(t, c, http.MethodPut, obj, body, signed)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: status %d", resp.StatusCode)
	}
	resp, got := mustDo(t, c, http.MethodGet, obj+"?x-id=GetObject", nil, signed)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("GET: status %d, %d bytes, equal %v", resp.StatusCode, len(got), bytes.Equal(got, body))
	}
	resp, got = mustDo(t, c, http.MethodGet, obj, nil, map[string]string{"Range": "bytes=10-19"})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, body[10:20]) {
		t.Fatalf("ranged GET: status %d, body %x", resp.StatusCode, got)
	}
	resp, _ = mustDo(t, c, http.MethodHead, obj, nil, nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) {
		t.Fatalf("HEAD: status %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	resp, got = mustDo(t, c, http.MethodGet, p.URL()+"/bucket?list-type=2&prefix=dir%2F", nil, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte("<Key>dir/a b+c+d~e</Key>")) {
		t.Fatalf("LIST: status %d, body %s", resp.StatusCode, got)
	}
	resp, _ = mustDo(t, c, http.MethodDelete, obj, nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: status %d", resp.StatusCode)
	}
	resp, _ = mustDo(t, c, http.MethodGet, obj, nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE: status %d", resp.StatusCode)
	}

	reqs := up.received()
	if len(reqs) != 7 {
		t.Fatalf("upstream received %d requests, want 7", len(reqs))
	}
	put := reqs[0]
	if put.Host != p.Addr() {
		t.Errorf("upstream saw Host %q, want the client's %q", put.Host, p.Addr())
	}
	if put.RequestURI != "/bucket/dir/a%20b+c%2Bd~e" {
		t.Errorf("upstream saw path %q", put.RequestURI)
	}
	if reqs[1].RequestURI != "/bucket/dir/a%20b+c%2Bd~e?x-id=GetObject" {
		t.Errorf("upstream saw %q", reqs[1].RequestURI)
	}
	for k, v := range signed {
		if got := put.Header.Get(k); got != v {
			t.Errorf("upstream saw %s %q, want %q", k, got, v)
		}
	}
	if put.BodyLen != int64(len(body)) || put.Chunked || put.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("upstream got a body of %d bytes, chunked %v, Content-Length %q", put.BodyLen, put.Chunked, put.Header.Get("Content-Length"))
	}
	if ua := put.Header.Get("User-Agent"); ua != "Go-http-client/1.1" { // the test client's own, not one the proxy added
		t.Errorf("upstream saw User-Agent %q", ua)
	}

	s := p.Stats()
	want := map[Op]int64{OpPut: 1, OpGet: 2, OpRangedGet: 1, OpHead: 1, OpList: 1, OpDelete: 1}
	if !equalCounts(s.Requests, want) || s.Forwarded != 7 || len(s.Injected) != 0 || s.UpstreamErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func equalCounts[K comparable](got, want map[K]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, n := range want {
		if got[k] != n {
			return false
		}
	}
	return true
}

// errorDoc is an S3 error document as a client parses it.
type errorDoc struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

func TestErrorRepliesAreS3Errors(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		faults Faults
		status int
		code   string
		kind   Kind
	}{
		{"put-slowdown", http.MethodPut, "/b/k", Faults{Put: OpFaults{SlowDownRate: 1}}, 503, "SlowDown", KindSlowDown},
		{"put-internal", http.MethodPut, "/b/k", Faults{Put: OpFaults{InternalErrorRate: 1}}, 500, "InternalError", KindInternalError},
		{"get-slowdown", http.MethodGet, "/b/k", Faults{Get: OpFaults{SlowDownRate: 1}}, 503, "SlowDown", KindSlowDown},
		{"list-internal", http.MethodGet, "/b?list-type=2", Faults{List: OpFaults{InternalErrorRate: 1}}, 500, "InternalError", KindInternalError},
		{"delete-slowdown", http.MethodDelete, "/b/k", Faults{Delete: OpFaults{SlowDownRate: 1}}, 503, "SlowDown", KindSlowDown},
		{"head-internal", http.MethodHead, "/b/k", Faults{Head: OpFaults{InternalErrorRate: 1}}, 500, "", KindInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t)
			up.put("/b/k", []byte("data"))
			p := newProxy(t, up.URL, 1)
			setFaults(t, p, tt.faults)
			var body []byte
			if tt.method == http.MethodPut {
				body = randomBytes(3 << 20) // read and discarded by the proxy, so the client reads the answer
			}
			resp, got := mustDo(t, newClient(t), tt.method, p.URL()+tt.path, body, signed)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
				t.Errorf("Content-Type %q", ct)
			}
			if resp.Header.Get("X-Amz-Request-Id") == "" {
				t.Errorf("no x-amz-request-id")
			}
			if tt.method != http.MethodHead {
				var doc errorDoc
				if err := xml.Unmarshal(got, &doc); err != nil {
					t.Fatalf("body %q does not parse: %v", got, err)
				}
				if doc.Code != tt.code || doc.Message == "" || doc.RequestID == "" ||
					doc.RequestID != resp.Header.Get("X-Amz-Request-Id") {
					t.Fatalf("error document %+v", doc)
				}
			}
			if n := len(up.received()); n != 0 {
				t.Fatalf("upstream received %d requests; an error answer must not be forwarded", n)
			}
			s := p.Stats()
			if s.Injected[tt.kind] != 1 || s.Forwarded != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestLostResponseAfterPutCommitted(t *testing.T) {
	up := newUpstream(t)
	p := newProxy(t, up.URL, 1)
	setFaults(t, p, Faults{Put: OpFaults{LostResponseRate: 1}})
	body := randomBytes(2 << 20)

	resp, err := do(t, newClient(t), http.MethodPut, p.URL()+"/b/lost", body, signed)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("PUT answered %d; want a broken connection", resp.StatusCode)
	}
	t.Logf("client error: %v", err)
	// The upstream completed the PUT before the proxy closed the connection.
	got, ok := up.object("/b/lost")
	if !ok || !bytes.Equal(got, body) {
		t.Fatalf("upstream holds %d bytes (present %v), want the whole %d", len(got), ok, len(body))
	}
	s := p.Stats()
	if s.Injected[KindLostResponse] != 1 || s.Forwarded != 1 || s.Requests[OpPut] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTruncatedGet(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name   string
		faults Faults
		header map[string]string
		length int64
	}{
		{"get", Faults{Get: OpFaults{TruncateRate: 1}}, nil, size},
		{"ranged-get", Faults{RangedGet: OpFaults{TruncateRate: 1}}, map[string]string{"Range": "bytes=1000-200999"}, 200000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t)
			up.put("/b/obj", randomBytes(size))
			p := newProxy(t, up.URL, 1)
			setFaults(t, p, tt.faults)
			resp, err := do(t, newClient(t), http.MethodGet, p.URL()+"/b/obj", nil, tt.header)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			defer resp.Body.Close()
			if resp.ContentLength != tt.length {
				t.Fatalf("Content-Length %d, want the whole %d", resp.ContentLength, tt.length)
			}
			got, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read %d bytes, error %v; want io.ErrUnexpectedEOF", len(got), err)
			}
			if int64(len(got)) != tt.length/2 {
				t.Fatalf("read %d bytes before the cut, want half of %d", len(got), tt.length)
			}
			if s := p.Stats(); s.Injected[KindTruncate] != 1 || s.Forwarded != 1 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestTruncateSparesFailuresAndEmptyBodies(t *testing.T) {
	up := newUpstream(t)
	up.put("/b/empty", nil)
	p := newProxy(t, up.URL, 1)
	setFaults(t, p, Faults{Get: OpFaults{TruncateRate: 1}})
	c := newClient(t)
	if resp, _ := mustDo(t, c, http.MethodGet, p.URL()+"/b/missing", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing: status %d", resp.StatusCode)
	}
	if resp, b := mustDo(t, c, http.MethodGet, p.URL()+"/b/empty", nil, nil); resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Fatalf("empty: status %d, %d bytes", resp.StatusCode, len(b))
	}
	if s := p.Stats(); len(s.Injected) != 0 || s.Forwarded != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestLatencyHoldsAtLeastTheDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	tests := []struct {
		name   string
		faults OpFaults
		least  time.Duration
	}{
		{"delay", OpFaults{Delay: delay}, delay},
		{"delay-jitter", OpFaults{Delay: delay, Jitter: delay / 3}, delay - delay/3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t)
			up.put("/b/k", []byte("x"))
			p := newProxy(t, up.URL, 1)
			setFaults(t, p, Faults{Get: tt.faults})
			c := newClient(t)
			for range 3 {
				start := time.Now()
				resp, _ := mustDo(t, c, http.MethodGet, p.URL()+"/b/k", nil, nil)
				if took := time.Since(start); took < tt.least || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET took %v with status %d; want at least %v", took, resp.StatusCode, tt.least)
				}
			}
			// A HEAD has no faults set: it is not held.
			mustDo(t, c, http.MethodHead, p.URL()+"/b/k", nil, nil)
			if s := p.Stats(); s.Injected[KindLatency] != 3 || s.Forwarded != 4 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestHealClears(t *testing.T) {
	up := newUpstream(t)
	up.put("/b/k", []byte("x"))
	p := newProxy(t, up.URL, 1)
	setFaults(t, p, AllOps(OpFaults{SlowDownRate: 1}))
	c := newClient(t)
	if resp, _ := mustDo(t, c, http.MethodGet, p.URL()+"/b/k", nil, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before heal: status %d", resp.StatusCode)
	}
	p.Heal()
	if p.Faults() != (Faults{}) {
		t.Fatalf("faults after heal: %+v", p.Faults())
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		var body []byte
		if m == http.MethodPut {
			body = []byte("y")
		}
		if resp, _ := mustDo(t, c, m, p.URL()+"/b/k", body, nil); resp.StatusCode/100 != 2 {
			t.Fatalf("%s after heal: status %d", m, resp.StatusCode)
		}
	}
	if s := p.Stats(); s.Injected[KindSlowDown] != 1 || s.Forwarded != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRatesDecideAFractionAndReplayBySeed(t *testing.T) {
	run := func(seed uint64) []int {
		up := newUpstream(t)
		up.put("/b/k", []byte("x"))
		p := newProxy(t, up.URL, seed)
		setFaults(t, p, Faults{Get: OpFaults{SlowDownRate: 0.3, InternalErrorRate: 0.2}})
		c := newClient(t)
		var statuses []int
		for range 200 {
			resp, _ := mustDo(t, c, http.MethodGet, p.URL()+"/b/k", nil, nil)
			statuses = append(statuses, resp.StatusCode)
		}
		s := p.Stats()
		if s.Injected[KindSlowDown]+s.Injected[KindInternalError]+s.Forwarded != 200 {
			t.Fatalf("stats %+v do not add up to 200 requests", s)
		}
		return statuses
	}
	a, b := run(42), run(42)
	count := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: status %d with one proxy, %d with another of the same seed", i, a[i], b[i])
		}
		count[a[i]]++
	}
	// Loose bounds: 200 draws at 0.3 and 0.2 land far inside these.
	if count[503] < 30 || count[503] > 90 || count[500] < 15 || count[500] > 70 || count[200] < 60 {
		t.Fatalf("status counts %v for rates 0.3 (503) and 0.2 (500)", count)
	}
}

func TestRequestBodyIsStreamed(t *testing.T) {
	// The client sends the first half and waits until the upstream has read
	// it before it sends the rest: a proxy that held the body would never
	// get there.
	const size = 8 << 20
	half := int64(size / 2)
	up := newUpstream(t)
	var upstreamRead atomic.Int64
	reachedHalf := make(chan struct{})
	up.onBody = func(r io.Reader) io.Reader {
		return readFunc(func(b []byte) (int, error) {
			n, err := r.Read(b)
			if upstreamRead.Add(int64(n)) >= half && upstreamRead.Load()-int64(n) < half {
				close(reachedHalf)
			}
			return n, err
		})
	}
	p := newProxy(t, up.URL, 1)
	body := randomBytes(size)
	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write(body[:half]); err != nil {
			pw.CloseWithError(err)
			return
		}
		select {
		case <-reachedHalf:
		case <-time.After(waitFor):
			pw.CloseWithError(errors.New("the upstream never saw the first half: the proxy holds the body"))
			return
		}
		_, err := pw.Write(body[half:])
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPut, p.URL()+"/b/big", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	resp.Body.Close()
	if got, _ := up.object("/b/big"); resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("status %d, upstream holds %d bytes", resp.StatusCode, len(got))
	}
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(b []byte) (int, error) { return f(b) }

func TestUpstreamDownIsBadGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newProxy(t, "http://"+addr, 1)
	resp, got := mustDo(t, newClient(t), http.MethodGet, p.URL()+"/b/k", nil, nil)
	var doc errorDoc
	if resp.StatusCode != http.StatusBadGateway || xml.Unmarshal(got, &doc) != nil || doc.Code != "BadGateway" {
		t.Fatalf("status %d, body %s", resp.StatusCode, got)
	}
	if s := p.Stats(); s.UpstreamErrors != 1 || len(s.Injected) != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCloseEndsDelayedRequests(t *testing.T) {
	up := newUpstream(t)
	p, err := New(Config{Upstream: up.URL, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	setFaults(t, p, Faults{Get: OpFaults{Delay: time.Hour}})
	c := newClient(t)
	req, err := http.NewRequest(http.MethodGet, p.URL()+"/b/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, "the request to be held", func() bool { return p.Stats().Injected[KindLatency] == 1 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Close did not return while a request was held")
	}
	if err := <-done; err == nil {
		t.Fatal("the held request got a response after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if n := len(up.received()); n != 0 {
		t.Fatalf("upstream received %d requests", n)
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		name string
		f    Faults
	}{
		{"negative-delay", Faults{Get: OpFaults{Delay: -1}}},
		{"negative-jitter", Faults{Put: OpFaults{Jitter: -1}}},
		{"rate-above-1", Faults{Put: OpFaults{SlowDownRate: 1.5}}},
		{"negative-rate", Faults{Head: OpFaults{InternalErrorRate: -0.1}}},
		{"nan-rate", Faults{List: OpFaults{LostResponseRate: math.NaN()}}},
		{"errors-above-1", Faults{Get: OpFaults{SlowDownRate: 0.6, InternalErrorRate: 0.6}}},
		{"replies-above-1", Faults{Get: OpFaults{LostResponseRate: 0.5, TruncateRate: 0.6}}},
		{"truncate-put", Faults{Put: OpFaults{TruncateRate: 0.1}}},
	}
	up := newUpstream(t)
	p := newProxy(t, up.URL, 1)
	good := AllOps(OpFaults{Delay: time.Millisecond, SlowDownRate: 0.5, InternalErrorRate: 0.5, LostResponseRate: 1})
	setFaults(t, p, good)
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			if err := p.SetFaults(tt.f); err == nil {
				t.Fatal("SetFaults accepted it")
			}
			if p.Faults() != good {
				t.Fatal("a rejected SetFaults changed the faults")
			}
		})
	}
	if err := AllOps(OpFaults{TruncateRate: 1}).Validate(); err != nil {
		t.Fatalf("AllOps with truncation: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, up := range []string{"", "127.0.0.1:9000", "ftp://h:1", "http://", "http://h:1/prefix", "http://h:1?x=1", "http://u:p@h:1"} {
		if _, err := New(Config{Upstream: up}); err == nil {
			t.Errorf("New accepted upstream %q", up)
		}
	}
	p, err := New(Config{Upstream: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer p.Close()
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.URL() != "http://"+p.Addr() {
		t.Fatalf("Addr %q, URL %q", p.Addr(), p.URL())
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		method, target string
		rng            bool
		want           Op
	}{
		{"GET", "/b/k", false, OpGet},
		{"GET", "/b/dir/k?x-id=GetObject", false, OpGet},
		{"GET", "/b/k?versionId=3&response-content-type=text%2Fplain", false, OpGet},
		{"GET", "/b/k", true, OpRangedGet},
		{"GET", "/b/k?acl", false, OpOther},
		{"GET", "/b/k?tagging", false, OpOther},
		{"GET", "/b/k?uploadId=1", false, OpOther}, // ListParts
		{"HEAD", "/b/k", false, OpHead},
		{"HEAD", "/b", false, OpOther}, // HeadBucket
		{"PUT", "/b/k?x-id=PutObject", false, OpPut},
		{"PUT", "/b/k?partNumber=1&uploadId=u", false, OpPut},
		{"PUT", "/b/k?tagging", false, OpOther},
		{"PUT", "/b", false, OpOther}, // CreateBucket
		{"DELETE", "/b/k", false, OpDelete},
		{"DELETE", "/b/k?uploadId=u", false, OpOther}, // AbortMultipartUpload
		{"DELETE", "/b", false, OpOther},              // DeleteBucket
		{"POST", "/b?delete", false, OpDelete},
		{"POST", "/b/k?uploads", false, OpOther},
		{"GET", "/b", false, OpList},
		{"GET", "/b/", false, OpList},
		{"GET", "/b?list-type=2&prefix=p%2F&continuation-token=t&x-id=ListObjectsV2", false, OpList},
		{"GET", "/b?location", false, OpOther},
		{"GET", "/b?versions", false, OpOther},
		{"GET", "/", false, OpOther}, // ListBuckets
		{"GET", "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=s", false, OpGet},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			r := httptest.NewRequestWithContext(context.Background(), tt.method, tt.target, nil)
			if tt.rng {
				r.Header.Set("Range", "bytes=0-9")
			}
			if got := classify(r); got != tt.want {
				t.Fatalf("classify = %s, want %s", got, tt.want)
			}
		})
	}
}
