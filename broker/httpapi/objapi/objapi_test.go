package objapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/objapi"
	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/internal/freeport"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// server runs the routes over a real Service (memory bucket, embedded
// etcd); the header X-Tenant stands for the pipeline's authentication.
func server(t *testing.T) string {
	t.Helper()
	st, err := meta.Open(t.Context(), meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeport.Must(t), ListenPeer: freeport.Must(t), StartTimeout: 30 * time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc, err := largeobj.New(largeobj.Config{Store: mem.New(), Sessions: st, PartSize: objstore.MinPartSize, MaxObjectBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	objapi.Register(mux, objapi.Deps{Service: svc, TopicExists: func(_ context.Context, topic string) bool { return topic != "nosuch" }})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tenant := r.Header.Get("X-Tenant"); tenant != "" {
			r = r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{Tenant: tenant, User: "u"}))
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func call(t *testing.T, method, url, tenant string, body []byte, hdr ...string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header
}

func errCode(raw []byte) string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Error.Code
}

func TestSessionRoutes(t *testing.T) {
	base := server(t)
	body := bytes.Repeat([]byte("sluice!"), (objstore.MinPartSize+1000)/7)
	sum := sha256.Sum256(body)
	hexSum := hex.EncodeToString(sum[:])
	size := len(body)
	begin := fmt.Sprintf(`{"topic":"big","size":%d,"sha256":%q,"content_type":"text/plain"}`, size, hexSum)

	if code, _, _ := call(t, "POST", base+"/v1/uploads", "", []byte(begin)); code != http.StatusUnauthorized {
		t.Fatalf("without an identity: %d", code)
	}
	code, raw, _ := call(t, "POST", base+"/v1/uploads", "acme", []byte(begin))
	var s objapi.SessionResponse
	if code != http.StatusCreated || json.Unmarshal(raw, &s) != nil || s.PartSize != objstore.MinPartSize || s.PutURL != "/v1/uploads/"+s.ID {
		t.Fatalf("POST /v1/uploads: %d %s", code, raw)
	}
	put := func(tenant string, off, n int, total string) (int, []byte) {
		code, raw, _ := call(t, "PUT", base+s.PutURL, tenant, body[off:off+n], "Content-Range", fmt.Sprintf("bytes %d-%d/%s", off, off+n-1, total))
		return code, raw
	}
	for _, tc := range []struct {
		tenant    string
		off, n    int
		want      int
		code      string
		rangeSpec string
	}{
		{"globex", 0, objstore.MinPartSize, http.StatusNotFound, "not_found", ""},
		{"acme", objstore.MinPartSize, 10, http.StatusConflict, "out_of_order", ""},
		{"acme", 0, 100, http.StatusBadRequest, "bad_request", ""},
	} {
		if code, raw := put(tc.tenant, tc.off, tc.n, fmt.Sprint(size)); code != tc.want || errCode(raw) != tc.code {
			t.Errorf("PUT %+v: %d %s", tc, code, raw)
		}
	}
	if code, raw, _ := call(t, "PUT", base+s.PutURL, "acme", body[:10], "Content-Range", "bytes 0-x/10"); code != http.StatusBadRequest {
		t.Errorf("bad Content-Range: %d %s", code, raw)
	}
	if code, raw := put("acme", 0, objstore.MinPartSize, fmt.Sprint(size)); code != http.StatusOK || !strings.Contains(string(raw), fmt.Sprintf(`"received":%d`, objstore.MinPartSize)) {
		t.Fatalf("PUT part 1: %d %s", code, raw)
	}
	if code, raw := put("acme", objstore.MinPartSize, size-objstore.MinPartSize, "*"); code != http.StatusOK {
		t.Fatalf("PUT the rest: %d %s", code, raw)
	}
	if code, raw, _ := call(t, "POST", base+"/v1/uploads/"+s.ID, "acme", nil); code != http.StatusNotFound {
		t.Errorf("POST without :complete: %d %s", code, raw)
	}
	if code, _, _ := call(t, "POST", base+"/v1/uploads/"+s.ID+":complete", "globex", nil); code != http.StatusNotFound {
		t.Errorf("another tenant's complete: %d", code)
	}
	code, raw, _ = call(t, "POST", base+"/v1/uploads/"+s.ID+":complete", "acme", nil)
	var c objapi.CompletedResponse
	if code != http.StatusOK || json.Unmarshal(raw, &c) != nil || c.Ref != s.ID || c.SHA256 != hexSum || c.Size != int64(size) || c.ContentType != "text/plain" {
		t.Fatalf("complete: %d %s", code, raw)
	}
	code, raw, h := call(t, "GET", base+"/v1/objects/"+s.ID, "acme", nil)
	if code != http.StatusOK || !bytes.Equal(raw, body) || h.Get("Content-Type") != "text/plain" || h.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("download: %d, %d bytes, %v", code, len(raw), h)
	}
	code, raw, h = call(t, "GET", base+"/v1/objects/"+s.ID, "acme", nil, "Range", "bytes=10-19")
	if code != http.StatusPartialContent || !bytes.Equal(raw, body[10:20]) || h.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", size) {
		t.Fatalf("ranged download: %d %q %v", code, raw, h)
	}
	if code, _, _ := call(t, "GET", base+"/v1/objects/"+s.ID, "globex", nil); code != http.StatusNotFound {
		t.Errorf("another tenant's download: %d", code)
	}
	if code, _, _ := call(t, "DELETE", base+"/v1/uploads/"+s.ID, "acme", nil); code != http.StatusNoContent {
		t.Errorf("abort a completed session: %d", code)
	}
	if code, _, _ := call(t, "GET", base+"/v1/objects/"+s.ID, "acme", nil); code != http.StatusNotFound {
		t.Errorf("download after abort: %d", code)
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{fmt.Sprintf(`{"topic":"big","size":%d,"sha256":%q}`, 33<<20, hexSum), http.StatusRequestEntityTooLarge},
		{fmt.Sprintf(`{"topic":"nosuch","size":1,"sha256":%q}`, hexSum), http.StatusNotFound},
		{`{"topic":"big","size":1,"sha256":"nothex"}`, http.StatusBadRequest},
		{`{"topic":"big"}`, http.StatusBadRequest},
	} {
		if code, raw, _ := call(t, "POST", base+"/v1/uploads", "acme", []byte(tc.body)); code != tc.want {
			t.Errorf("POST %s: %d %s; want %d", tc.body, code, raw, tc.want)
		}
	}
}

// TestBeginRefusesBadJSONInItsOwnTerms: a body POST /v1/uploads cannot
// decode is a 400 (413 over its bound) whose JSON message names the field
// and the JSON it expected, never the Go types behind it.
func TestBeginRefusesBadJSONInItsOwnTerms(t *testing.T) {
	base := server(t)
	for _, tc := range []struct {
		body, code, says string
		want             int
	}{
		{`{"topic":"big","size":"10","sha256":"x"}`, "bad_request", "field size: expected an integer", http.StatusBadRequest},
		{`{"topic":7,"size":10,"sha256":"x"}`, "bad_request", "field topic: expected a string, got a JSON number", http.StatusBadRequest},
		{`["big"]`, "bad_request", "the body must be an object, not a JSON array", http.StatusBadRequest},
		{`{"topic":"big","size":10,"sha256":"x","colour":1}`, "bad_request", `unknown field "colour"`, http.StatusBadRequest},
		{`{"topic":"big","size":10,"sha256":"x"} {}`, "bad_request", "data after the request object", http.StatusBadRequest},
		{`{"topic":"` + strings.Repeat("t", 20<<10) + `"}`, "too_large", "request body exceeds 16384 bytes", http.StatusRequestEntityTooLarge},
	} {
		code, raw, h := call(t, "POST", base+"/v1/uploads", "acme", []byte(tc.body))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || h.Get("Content-Type") != "application/json" {
			t.Errorf("POST %.60s: body %q (Content-Type %q) is not a JSON error: %v", tc.body, raw, h.Get("Content-Type"), err)
			continue
		}
		if code != tc.want || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("POST %.60s: %d %s %q; want %d %s saying %q", tc.body, code, e.Error.Code, e.Error.Message, tc.want, tc.code, tc.says)
		}
		for _, goWord := range []string{"Go ", "struct", "objapi", "BeginRequest", "int64", "json:"} {
			if strings.Contains(e.Error.Message, goWord) {
				t.Errorf("POST %.60s: message %q names Go's %q", tc.body, e.Error.Message, goWord)
			}
		}
	}
}

// TestOpenAPIFragment: the fragment documents exactly the routes Register
// adds (":complete" is served by POST /v1/uploads/{id}).
func TestOpenAPIFragment(t *testing.T) {
	raw, err := os.ReadFile("openapi_fragment.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	objapi.Register(mux, objapi.Deps{Service: (*largeobj.Service)(nil)})
	served := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			url := strings.NewReplacer("{id}", "x", "{ref}", "x").Replace(path)
			_, got := mux.Handler(httptest.NewRequest(strings.ToUpper(method), url, nil))
			if got == "" {
				t.Errorf("documented %s %s is not served", method, path)
			}
			served[got] = true
		}
	}
	for _, p := range objapi.Routes {
		if !served[p] {
			t.Errorf("route %s is not documented", p)
		}
	}
}
