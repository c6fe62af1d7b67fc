package broker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// genReader yields n deterministic pseudo-random bytes of seed, never held
// whole.
type genReader struct {
	src  *rand.ChaCha8
	left int64
}

func newGen(seed uint64, n int64) *genReader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return &genReader{src: rand.NewChaCha8(s), left: n}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, _ := g.src.Read(p)
	g.left -= int64(n)
	return n, nil
}

// genSlice is bytes [off, off+n) of the generator's output.
func genSlice(seed uint64, off, n int64) []byte {
	g := newGen(seed, off+n)
	_, _ = io.CopyN(io.Discard, g, off)
	b, _ := io.ReadAll(g)
	return b
}

func genSHA(seed uint64, n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, newGen(seed, n))
	return hex.EncodeToString(h.Sum(nil))
}

type upload struct {
	ID             string    `json:"id"`
	PartSize       int64     `json:"part_size"`
	PutURL         string    `json:"put_url"`
	ExpiresAt      time.Time `json:"expires_at"`
	PresignedParts []struct {
		Number int32  `json:"part_number"`
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
		URL    string `json:"url"`
	} `json:"presigned_parts"`
}

func doHTTP(t testing.TB, method, url string, body io.Reader, n int64, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.ContentLength = n
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header
}

func startLargeObjectBroker(t *testing.T) (*Broker, string) {
	t.Helper()
	srv := s3test.Start(t)
	cfg := testBrokerConfig(t)
	cfg.ObjectStore, cfg.ObjectStoreOptions = srv.URL(fmt.Sprintf("large-%d", time.Now().UnixNano())), srv.Options()
	cfg.ObjectStoreOptions.Timeout = 2 * time.Minute
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"big","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create topic: %d %v", code, body)
	}
	return b, base
}

func beginUpload(t testing.TB, base string, size int64, sum string) upload {
	t.Helper()
	code, raw, _ := doHTTP(t, "POST", base+"/v1/uploads", strings.NewReader(fmt.Sprintf(
		`{"topic":"big","size":%d,"sha256":%q,"content_type":"application/octet-stream"}`, size, sum)), -1, nil)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/uploads: %d %s", code, raw)
	}
	var u upload
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// putAll sends the generator's bytes in requests of perReq parts.
func putAll(t testing.TB, base string, u upload, seed uint64, size int64, perReq int64) error {
	g := newGen(seed, size)
	for off := int64(0); off < size; {
		n := min(u.PartSize*perReq, size-off)
		code, raw, _ := doHTTP(t, "PUT", base+u.PutURL, io.LimitReader(g, n), n,
			map[string]string{"Content-Range": fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size)})
		if code != http.StatusOK {
			return fmt.Errorf("PUT [%d, +%d): %d %s", off, n, code, raw)
		}
		off += n
	}
	return nil
}

func completeUpload(t testing.TB, base, id string) (int, map[string]any) {
	t.Helper()
	code, raw, _ := doHTTP(t, "POST", base+"/v1/uploads/"+id+":complete", nil, 0, nil)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

// TestLargePayloadOverHTTP: 100 MiB through a broker on versitygw in parts,
// completed with the streamed hash, downloaded whole and by ranges.
func TestLargePayloadOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 100 MiB through a broker and an S3 server")
	}
	b, base := startLargeObjectBroker(t)
	const size = int64(100 << 20)
	sum := genSHA(1, size)
	u := beginUpload(t, base, size, sum)
	if u.PartSize != largeobj.DefaultPartSize || len(u.PresignedParts) != int((size+u.PartSize-1)/u.PartSize) {
		t.Fatalf("session: part size %d, %d presigned parts", u.PartSize, len(u.PresignedParts))
	}
	// Out of order: 409 naming the expected offset.
	code, raw, _ := doHTTP(t, "PUT", base+u.PutURL, bytes.NewReader(make([]byte, 10)), 10,
		map[string]string{"Content-Range": fmt.Sprintf("bytes %d-%d/%d", u.PartSize, u.PartSize+9, size)})
	if code != http.StatusConflict || !strings.Contains(string(raw), "out_of_order") {
		t.Fatalf("out-of-order PUT: %d %s", code, raw)
	}
	if err := putAll(t, base, u, 1, size, 3); err != nil {
		t.Fatal(err)
	}
	code, out := completeUpload(t, base, u.ID)
	if code != http.StatusOK || out["ref"] != u.ID || out["sha256"] != sum || out["size"] != float64(size) || out["expires_if_unpublished"] == nil {
		t.Fatalf("complete: %d %v", code, out)
	}
	// The whole object, hashed as it streams.
	resp, err := http.Get(base + "/v1/objects/" + u.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != size || hex.EncodeToString(h.Sum(nil)) != sum || resp.Header.Get("X-Sluice-Sha256") != sum {
		t.Fatalf("download: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	for _, tc := range []struct {
		rng    string
		off, n int64
	}{{"bytes=1000-1999", 1000, 1000}, {fmt.Sprintf("bytes=%d-", size-5), size - 5, 5}, {"bytes=-7", size - 7, 7},
		{fmt.Sprintf("bytes=%d-%d", u.PartSize-3, u.PartSize+2), u.PartSize - 3, 6}} {
		code, raw, hdr := doHTTP(t, "GET", base+"/v1/objects/"+u.ID, nil, 0, map[string]string{"Range": tc.rng})
		want := genSlice(1, tc.off, tc.n)
		if code != http.StatusPartialContent || !bytes.Equal(raw, want) ||
			hdr.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", tc.off, tc.off+tc.n-1, size) {
			t.Fatalf("Range %s: %d, %d bytes, Content-Range %q", tc.rng, code, len(raw), hdr.Get("Content-Range"))
		}
	}
	if code, _, _ := doHTTP(t, "GET", base+"/v1/objects/"+u.ID, nil, 0, map[string]string{"Range": fmt.Sprintf("bytes=%d-", size)}); code != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("range beyond the end: %d", code)
	}
	if code, _, _ := doHTTP(t, "GET", base+"/v1/objects/nosuchref", nil, 0, nil); code != http.StatusNotFound {
		t.Fatalf("unknown ref: %d", code)
	}
	// The broker's Claim (the produce hook) publishes it.
	if err := b.LargeObjects().Claim(t.Context(), "default", refOf(t, u.ID, size, sum), siteOf(t, b, "big", 0)); err != nil {
		t.Fatalf("Claim: %v", err)
	}
}

// TestLargePayloadRefusals: a wrong declared sha256 is 422 and the bytes are
// gone; size above the maximum 413; a bad body 400; an unknown topic 404.
func TestLargePayloadRefusals(t *testing.T) {
	b, base := startLargeObjectBroker(t)
	const size = int64(9 << 20)
	wrong := strings.Repeat("0", 64)
	u := beginUpload(t, base, size, wrong)
	if err := putAll(t, base, u, 2, size, 1); err != nil {
		t.Fatal(err)
	}
	code, out := completeUpload(t, base, u.ID)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out), "checksum_mismatch") {
		t.Fatalf("complete with a wrong sha256: %d %v", code, out)
	}
	if _, err := b.Objects.Head(t.Context(), largeobj.ObjectKey("default", u.ID)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the object after the mismatch: %v", err)
	}
	if code, _, _ := doHTTP(t, "GET", base+"/v1/objects/"+u.ID, nil, 0, nil); code != http.StatusNotFound {
		t.Fatalf("download of a failed session: %d", code)
	}
	if code, _ := completeUpload(t, base, u.ID); code != http.StatusConflict {
		t.Fatalf("complete again: %d", code)
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{fmt.Sprintf(`{"topic":"big","size":%d,"sha256":%q}`, int64(200<<20), wrong), http.StatusRequestEntityTooLarge},
		{`{"topic":"big","size":10,"sha256":"xyz"}`, http.StatusBadRequest},
		{`{"topic":"big","size":10,"sha256":` + fmt.Sprintf("%q", wrong) + `,"extra":1}`, http.StatusBadRequest},
		{`{"topic":"big"`, http.StatusBadRequest},
		{`{"topic":"nosuch","size":10,"sha256":` + fmt.Sprintf("%q", wrong) + `}`, http.StatusNotFound},
	} {
		if code, raw, _ := doHTTP(t, "POST", base+"/v1/uploads", strings.NewReader(tc.body), -1, nil); code != tc.want {
			t.Errorf("POST /v1/uploads %s: %d %s; want %d", tc.body, code, raw, tc.want)
		}
	}
	// Abort: 204, then the session is gone for PUTs.
	u2 := beginUpload(t, base, 10, wrong)
	if code, raw, _ := doHTTP(t, "DELETE", base+"/v1/uploads/"+u2.ID, nil, 0, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, raw)
	}
	if code, _, _ := doHTTP(t, "PUT", base+u2.PutURL, bytes.NewReader(make([]byte, 10)), 10, nil); code != http.StatusConflict {
		t.Fatalf("PUT after abort: %d", code)
	}
}

// TestLargePayloadPresignedParts: the parts go straight to versitygw by
// the presigned URLs; Complete reads the object back to check it.
func TestLargePayloadPresignedParts(t *testing.T) {
	_, base := startLargeObjectBroker(t)
	const size = int64(20<<20 + 5)
	sum := genSHA(3, size)
	u := beginUpload(t, base, size, sum)
	if len(u.PresignedParts) != 3 {
		t.Fatalf("%d presigned parts, want 3", len(u.PresignedParts))
	}
	for _, p := range u.PresignedParts {
		code, raw, _ := doHTTP(t, "PUT", p.URL, bytes.NewReader(genSlice(3, p.Offset, p.Length)), p.Length, nil)
		if code != http.StatusOK {
			t.Fatalf("PUT part %d to its presigned URL: %d %s", p.Number, code, raw)
		}
	}
	code, out := completeUpload(t, base, u.ID)
	if code != http.StatusOK || out["sha256"] != sum {
		t.Fatalf("complete: %d %v", code, out)
	}
	code, raw, _ := doHTTP(t, "GET", base+"/v1/objects/"+u.ID, nil, 0, nil)
	if got := sha256.Sum256(raw); code != 200 || hex.EncodeToString(got[:]) != sum {
		t.Fatalf("download: %d, %d bytes", code, len(raw))
	}
	// Corrupt parts sent directly: read back, 422.
	u2 := beginUpload(t, base, size, sum)
	for _, p := range u2.PresignedParts {
		body := genSlice(3, p.Offset, p.Length)
		body[0] ^= 1
		if code, raw, _ := doHTTP(t, "PUT", p.URL, bytes.NewReader(body), p.Length, nil); code != http.StatusOK {
			t.Fatalf("PUT part %d: %d %s", p.Number, code, raw)
		}
	}
	if code, out := completeUpload(t, base, u2.ID); code != http.StatusUnprocessableEntity {
		t.Fatalf("complete of corrupt direct parts: %d %v", code, out)
	}
}

// TestLargePayloadHeapTenUploads reports the broker process's heap while
// ten 100 MiB uploads stream at once (the issue asks RSS under 200 MB; the
// test reports, it does not assert).
func TestLargePayloadHeapTenUploads(t *testing.T) {
	if testing.Short() || os.Getenv("SLUICE_LARGE_HEAP") == "" {
		t.Skip("set SLUICE_LARGE_HEAP=1: streams 1 GiB through a broker and an S3 server")
	}
	_, base := startLargeObjectBroker(t)
	const size = int64(100 << 20)
	sums := make([]string, 10)
	for i := range sums {
		sums[i] = genSHA(uint64(10+i), size)
	}
	runtime.GC()
	var peakHeap, peakSys atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				if ms.Sys > peakSys.Load() {
					peakSys.Store(ms.Sys)
				}
			}
		}
	}()
	start := time.Now()
	errs := make(chan error, len(sums))
	for i, sum := range sums {
		go func() {
			u := beginUpload(t, base, size, sum)
			if err := putAll(t, base, u, uint64(10+i), size, 1); err != nil {
				errs <- err
				return
			}
			if code, out := completeUpload(t, base, u.ID); code != http.StatusOK {
				errs <- fmt.Errorf("complete %d: %d %v", i, code, out)
				return
			}
			errs <- nil
		}()
	}
	for range sums {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("ten 100 MiB uploads in %v (%.1f MB/s); peak heap in use %.1f MiB, peak Go runtime memory %.1f MiB; VmHWM %s",
		elapsed.Round(time.Millisecond), float64(10*size)/1e6/elapsed.Seconds(),
		float64(peakHeap.Load())/(1<<20), float64(peakSys.Load())/(1<<20), vmHWM())
}

func vmHWM() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func refOf(t *testing.T, id string, size int64, sum string) ref.Ref {
	t.Helper()
	return ref.Ref{ID: id, Size: size, SHA256: sum}
}

// TestLargePayloadSecurity: with security on, opening a session needs WRITE
// on its topic (403 without, whatever the cluster allows), and another
// tenant's user never reaches a session or object (404).
func TestLargePayloadSecurity(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = false
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-secret\n")
	b := startBroker(t, cfg)
	anon := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}
	admin := anon.with(basic("admin", "admin-secret"))
	admin.must(http.StatusCreated, "POST", "/v1/tenants", `{"name":"team-a"}`)
	admin.must(http.StatusCreated, "POST", "/v1/users", `{"name":"alice","tenant":"default","password":"alice-pw"}`)
	admin.must(http.StatusCreated, "POST", "/v1/users", `{"name":"erin","tenant":"team-a","password":"erin-pw"}`)
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"orders"}`)
	alice, erin := anon.with(basic("alice", "alice-pw")), anon.with(basic("erin", "erin-pw"))
	sum := sha256.Sum256([]byte("hello"))
	begin := fmt.Sprintf(`{"topic":"orders","size":5,"sha256":%q}`, hex.EncodeToString(sum[:]))
	if code, out, _ := anon.call("POST", "/v1/uploads", begin); code != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d %v", code, out)
	}
	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"default","bindings":[
		{"resource_type":"cluster","principal":"User:alice","operation":"all","permission":"allow"}]}`)
	if code, out, _ := alice.call("POST", "/v1/uploads", begin); code != http.StatusForbidden {
		t.Fatalf("without WRITE on the topic: %d %v", code, out)
	}
	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"default","bindings":[
		{"resource_type":"topic","resource_name":"orders","principal":"User:alice","operation":"write","permission":"allow"}]}`)
	var id string
	eventuallyTrue(t, "alice's WRITE applies", func() (bool, string) {
		code, out, _ := alice.call("POST", "/v1/uploads", begin)
		id, _ = out["id"].(string)
		return code == http.StatusCreated, fmt.Sprint(code, out)
	})
	alice.must(http.StatusOK, "PUT", "/v1/uploads/"+id, "hello")
	alice.must(http.StatusOK, "POST", "/v1/uploads/"+id+":complete", "")
	if code, _, _ := alice.call("GET", "/v1/objects/"+id, ""); code != http.StatusOK {
		t.Fatalf("alice's download: %d", code)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/objects/" + id, ""}, {"POST", "/v1/uploads/" + id + ":complete", ""},
		{"DELETE", "/v1/uploads/" + id, ""}, {"PUT", "/v1/uploads/" + id, "hello"},
	} {
		if code, out, _ := erin.call(r.method, r.path, r.body); code != http.StatusNotFound {
			t.Errorf("erin %s %s: %d %v; want 404", r.method, r.path, code, out)
		}
	}
	if err := b.LargeObjects().Claim(t.Context(), "team-a", refOf(t, id, 5, hex.EncodeToString(sum[:])), siteOf(t, b, "orders", 0)); err == nil {
		t.Error("team-a claimed default's reference")
	}
}
