package payload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/internal/freeport"
	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/payload/ref"
)

// fakeUploads implements the upload routes minimally (the real ones are
// broker/httpapi/objapi's): sessions in memory, parts appended in order,
// completion checking size and SHA-256; and it claims references for the
// broker as the object service does.
type fakeUploads struct {
	t        *testing.T
	partSize int64
	apiKey   string

	mu       sync.Mutex
	sessions map[string]*fakeSession
	objects  map[string][]byte // by ref
	maxPut   int64             // the largest PUT body seen
	next     int
}

type fakeSession struct {
	topic, sha string
	size       int64
	buf        bytes.Buffer
	ref        string
	published  bool
}

func newFakeUploads(t *testing.T, partSize int64) *fakeUploads {
	return &fakeUploads{t: t, partSize: partSize, apiKey: "k3y", sessions: map[string]*fakeSession{}, objects: map[string][]byte{}}
}

func (f *fakeUploads) fail(w http.ResponseWriter, status int, code, msg string) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (f *fakeUploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		f.fail(w, 401, "unauthenticated", "no API key")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/uploads":
		var req struct {
			Topic, SHA256, ContentType string
			Size                       int64
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || ref.ValidSHA256(req.SHA256) != nil {
			f.fail(w, 400, "bad_request", fmt.Sprint(err))
			return
		}
		f.next++
		id := fmt.Sprintf("s%d", f.next)
		f.sessions[id] = &fakeSession{topic: req.Topic, sha: req.SHA256, size: req.Size}
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "part_size": f.partSize, "put_url": "/v1/uploads/" + id,
			"complete_url": "/v1/uploads/" + id + ":complete", "expires_at": time.Now().Add(time.Hour)})
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/uploads/"):
		s := f.sessions[strings.TrimPrefix(r.URL.Path, "/v1/uploads/")]
		if s == nil {
			f.fail(w, 404, "not_found", "no session")
			return
		}
		var a, b, total int64
		if _, err := fmt.Sscanf(r.Header.Get("Content-Range"), "bytes %d-%d/%d", &a, &b, &total); err != nil ||
			a != int64(s.buf.Len()) || total != s.size || ((b-a+1)%f.partSize != 0 && b+1 != total) {
			f.fail(w, 409, "out_of_order", "bad range "+r.Header.Get("Content-Range"))
			return
		}
		n, _ := io.Copy(&s.buf, r.Body)
		f.maxPut = max(f.maxPut, n)
		json.NewEncoder(w).Encode(map[string]any{"received": s.buf.Len()})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":complete"):
		s := f.sessions[strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/uploads/"), ":complete")]
		if s == nil {
			f.fail(w, 404, "not_found", "no session")
			return
		}
		if sum := sha256.Sum256(s.buf.Bytes()); int64(s.buf.Len()) != s.size || ref.SumHex(sum) != s.sha {
			f.fail(w, 422, "checksum_mismatch", "bytes do not match")
			return
		}
		s.ref = "ref" + strings.TrimPrefix(r.URL.Path, "/v1/uploads/s")
		s.ref = strings.TrimSuffix(s.ref, ":complete")
		f.objects[s.ref] = s.buf.Bytes()
		json.NewEncoder(w).Encode(map[string]any{"ref": s.ref, "size": s.size, "sha256": s.sha, "content_type": "application/pdf",
			"expires_if_unpublished": time.Now().Add(time.Hour)})
	case r.Method == http.MethodDelete:
		delete(f.sessions, strings.TrimPrefix(r.URL.Path, "/v1/uploads/"))
		w.WriteHeader(204)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/objects/"):
		obj, ok := f.objects[strings.TrimPrefix(r.URL.Path, "/v1/objects/")]
		if !ok {
			f.fail(w, 404, "not_found", "no object")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(obj)))
		w.Write(obj)
	default:
		f.fail(w, 404, "not_found", r.Method+" "+r.URL.Path)
	}
}

// Claim is the object service's claim, over the fake's sessions.
func (f *fakeUploads) Claim(_ context.Context, tenant string, r ref.Ref, _ node.RefSite) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.ref == r.ID {
			if s.size != r.Size || s.sha != r.SHA256 {
				return ref.ErrMismatch
			}
			s.published = true
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ref.ErrUnknown, r.ID)
}

// startBroker runs a real broker whose object service is f.
func startBroker(t *testing.T, f *fakeUploads) *broker.Broker {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaListen, cfg.HTTPListen = freeport.Must(t), freeport.Must(t)
	cfg.InterBrokerListen = "127.0.0.1:0"
	cfg.Meta.ListenClient, cfg.Meta.ListenPeer = freeport.Must(t), freeport.Must(t)
	cfg.Journal.FileBytes, cfg.Journal.CheckpointBytes = 1<<20, 4<<20
	cfg.Refs = f
	b, err := broker.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("broker did not stop")
		}
	})
	select {
	case <-b.Ready():
	case err := <-errc:
		t.Fatalf("broker stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("broker not ready")
	}
	return b
}

func TestPutAndOpen(t *testing.T) {
	f := newFakeUploads(t, 64<<10)
	srv := httptest.NewServer(f)
	defer srv.Close()
	b := startBroker(t, f)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.KafkaAddr()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("docs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(t, cl, "docs")

	body := make([]byte, 300<<10+17) // not a whole number of parts
	rand.NewChaCha8([32]byte{7}).Read(body)
	opts := payload.Options{APIKey: f.apiKey, ContentType: "application/pdf", Preview: []byte("invoice"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	// A plain io.Reader needs the SHA-256 up front.
	if _, err := payload.Put(ctx, cl, srv.URL, "docs", []byte("k"), io.MultiReader(bytes.NewReader(body)), int64(len(body)), opts); err == nil {
		t.Fatal("Put of a plain reader without Options.SHA256 succeeded")
	}
	r, err := payload.Put(ctx, cl, srv.URL, "docs", []byte("k"), bytes.NewReader(body), int64(len(body)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != int64(len(body)) || r.SHA256 != ref.SumHex(sha256.Sum256(body)) {
		t.Fatalf("ref %+v", r)
	}
	if f.maxPut > f.partSize {
		t.Fatalf("a PUT carried %d bytes, more than the part size %d", f.maxPut, f.partSize)
	}
	// With the checksum given, a plain reader streams in one pass.
	opts2 := opts
	opts2.SHA256 = r.SHA256
	if _, err := payload.Put(ctx, cl, srv.URL, "docs", nil, io.MultiReader(bytes.NewReader(body)), int64(len(body)), opts2); err != nil {
		t.Fatal(err)
	}
	// A body that is not what was declared is aborted before completion.
	opts2.SHA256 = ref.SumHex(sha256.Sum256([]byte("other")))
	if _, err := payload.Put(ctx, cl, srv.URL, "docs", nil, bytes.NewReader(body), int64(len(body)), opts2); !errors.Is(err, payload.ErrChecksum) {
		t.Fatalf("Put of a body unlike its declared checksum: %v, want ErrChecksum", err)
	}

	c := &payload.Client{Base: srv.URL, Options: payload.Options{APIKey: f.apiKey}}
	var recs []*kgo.Record
	for len(recs) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 2 envelopes", len(recs))
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if string(recs[0].Value) != "invoice" || recs[0].Headers[0].Key != "trace" {
		t.Fatalf("envelope %+v", recs[0])
	}
	for _, rec := range recs {
		rc, err := c.Open(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("Open: %d bytes, %v", len(got), err)
		}
	}

	// A corrupted byte: ErrChecksum at the end, never io.EOF.
	f.mu.Lock()
	f.objects[r.ID][1000] ^= 1
	f.mu.Unlock()
	rc, err := c.Open(ctx, recs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, payload.ErrChecksum) {
		t.Fatalf("reading a corrupted object: %v, want ErrChecksum", err)
	}
	// A truncated object too.
	f.mu.Lock()
	f.objects[r.ID] = body[:len(body)-1]
	f.mu.Unlock()
	rc, _ = c.Open(ctx, recs[0])
	if _, err := io.ReadAll(rc); !errors.Is(err, payload.ErrChecksum) {
		t.Fatalf("reading a truncated object: %v, want ErrChecksum", err)
	}
	// A missing object.
	f.mu.Lock()
	delete(f.objects, r.ID)
	f.mu.Unlock()
	if _, err := c.Open(ctx, recs[0]); !errors.Is(err, payload.ErrMissing) {
		t.Fatalf("opening a missing object: %v, want ErrMissing", err)
	}
	// An inline record is its own payload.
	rc, err = c.Open(ctx, &kgo.Record{Value: []byte("inline")})
	if got, _ := io.ReadAll(rc); err != nil || string(got) != "inline" {
		t.Fatalf("inline: %q %v", got, err)
	}
}

func createTopic(t *testing.T, cl *kgo.Client, name string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 && resp.Topics[0].ErrorCode != 36 { // 36: auto-created by the consumer
		t.Fatalf("create topic %s: %v %+v", name, err, resp)
	}
}

// TestUploadAnsweredBeforeItsBodyIsRead: an endpoint that answers a part's
// PUT without reading its body (a proxy's early answer). The transport then
// goes on reading the body after Do returns; the client used to read its
// count of the part's bytes meanwhile (a data race under -race, and the
// next part could read the caller's stream while the transport still did).
// The upload must fail, naming the short part, and never read the body
// concurrently.
func TestUploadAnsweredBeforeItsBodyIsRead(t *testing.T) {
	const part = 32 << 20 // more than the loopback socket buffers hold
	f := newFakeUploads(t, part)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("Connection", "close")
			json.NewEncoder(w).Encode(map[string]any{"received": 0}) // answered unread
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	body := make([]byte, part+1)
	c := &payload.Client{Base: srv.URL, Options: payload.Options{APIKey: f.apiKey}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Upload(ctx, "docs", bytes.NewReader(body), int64(len(body)))
	if err == nil || !strings.Contains(err.Error(), "the body ended after") && !strings.Contains(err.Error(), "PUT bytes") {
		t.Fatalf("upload to an endpoint that never read the part: %v, want a failed PUT", err)
	}
}
