package payload

// This file owns Put and Open (see doc.go) and the verifying reader.
//
// Invariant: Put never holds more than one read buffer of the body in
// memory; Open's reader yields io.EOF only after exactly the envelope's
// size in bytes whose SHA-256 is the envelope's.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/payload/ref"
)

var (
	// ErrChecksum: the bytes of an object (read by Open, or sent by Put)
	// are not the size and SHA-256 they were declared with.
	ErrChecksum = errors.New("payload: object does not match its size and sha256")
	// ErrMissing: the broker has no object for a reference (deleted,
	// never completed, or another tenant's).
	ErrMissing = errors.New("payload: object not found")
)

// DefaultPartSize is the part size when a session's answer names none.
const DefaultPartSize = 8 << 20

// Options are a Put's or an Open's optional settings.
type Options struct {
	// HTTPClient makes the HTTP calls; nil is http.DefaultClient.
	HTTPClient *http.Client
	// APIKey, or Username and Password, authenticate the calls.
	APIKey             string
	Username, Password string

	// For Put: the payload's SHA-256 (64 lowercase hex digits) when known;
	// empty needs an io.ReadSeeker body, hashed in a first pass.
	SHA256      string
	ContentType string
	// KeyID and Algorithm describe the producer's own encryption of the
	// payload; they travel in the envelope as given.
	KeyID, Algorithm string
	// Preview is the envelope record's value (the broker takes at most a
	// few bytes' worth inline: keep it under 1 KiB).
	Preview []byte
	// Headers are the envelope record's own headers, before the
	// convention's.
	Headers []kgo.RecordHeader
	// Transfer is how Put sends the bytes (see doc.go, "Transfer"); the
	// zero value is TransferAuto.
	Transfer Transfer
	// OnFallback, when set, is told why a presigned upload was given up
	// for the broker-streamed one (TransferAuto only).
	OnFallback func(err error)
}

// Transfer chooses the path of a payload's bytes.
type Transfer int

const (
	// TransferAuto PUTs the parts to the presigned URLs when the session
	// offers them, and falls back to the broker when that fails.
	TransferAuto Transfer = iota
	// TransferBroker always streams the parts through the broker.
	TransferBroker
	// TransferPresigned always PUTs the parts to the presigned URLs; a
	// session without them, or a failed PUT, fails the upload.
	TransferPresigned
)

func (t Transfer) String() string {
	switch t {
	case TransferAuto:
		return "auto"
	case TransferBroker:
		return "broker"
	case TransferPresigned:
		return "presigned"
	}
	return fmt.Sprintf("Transfer(%d)", int(t))
}

// Client reaches one cluster's HTTP API at Base (for example
// "http://broker:8080").
type Client struct {
	Base string
	Options
}

// Put uploads size bytes of body as the payload of a record for topic
// with key, publishes the envelope with cl, and returns its reference.
func Put(ctx context.Context, cl *kgo.Client, httpBase, topic string, key []byte, body io.Reader, size int64, opts Options) (ref.Ref, error) {
	c := &Client{Base: httpBase, Options: opts}
	return c.Put(ctx, cl, topic, key, body, size)
}

// Put is the package's Put with c's base and options.
func (c *Client) Put(ctx context.Context, cl *kgo.Client, topic string, key []byte, body io.Reader, size int64) (ref.Ref, error) {
	r, err := c.Upload(ctx, topic, body, size)
	if err != nil {
		return ref.Ref{}, err
	}
	rec := &kgo.Record{Topic: topic, Key: key, Value: c.Preview}
	rec.Headers = append(rec.Headers, c.Headers...)
	for _, h := range r.Headers() {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return r, fmt.Errorf("payload: publish the envelope of %s: %w", r.ID, err)
	}
	return r, nil
}

type session struct {
	ID             string          `json:"id"`
	PartSize       int64           `json:"part_size"`
	PutURL         string          `json:"put_url"`
	CompleteURL    string          `json:"complete_url"`
	PresignedParts []presignedPart `json:"presigned_parts"`
}

// presignedPart is one part the session lets the client PUT straight to
// the object store.
type presignedPart struct {
	Number int32  `json:"part_number"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	URL    string `json:"url"`
}

// ErrNoPresigned: TransferPresigned was asked of a session that offers no
// presigned part URLs (the broker's store does not presign).
var ErrNoPresigned = errors.New("payload: the upload session offers no presigned part URLs")

type completed struct {
	Ref         string `json:"ref"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
	KeyID       string `json:"enc_key_id"`
	Algorithm   string `json:"enc_alg"`
}

// Upload opens a session for topic, streams size bytes of body to it and
// completes it, without publishing: the answer is the reference to
// publish (an envelope record, or object_ref over HTTP).
func (c *Client) Upload(ctx context.Context, topic string, body io.Reader, size int64) (ref.Ref, error) {
	if size < 0 || size > ref.MaxSize {
		return ref.Ref{}, fmt.Errorf("payload: size %d is outside 0 to %d", size, ref.MaxSize)
	}
	sum := c.SHA256
	if sum == "" {
		rs, ok := body.(io.ReadSeeker)
		if !ok {
			return ref.Ref{}, errors.New("payload: the upload session needs the payload's SHA-256: set Options.SHA256 or pass an io.ReadSeeker")
		}
		h := sha256.New()
		if n, err := io.Copy(h, io.LimitReader(rs, size)); err != nil || n != size {
			return ref.Ref{}, fmt.Errorf("payload: hash the body: read %d of %d bytes: %w", n, size, err)
		}
		if _, err := rs.Seek(-size, io.SeekCurrent); err != nil {
			return ref.Ref{}, fmt.Errorf("payload: rewind the body after hashing it: %w", err)
		}
		sum = ref.SumHex([32]byte(h.Sum(nil)))
	}
	if err := ref.ValidSHA256(sum); err != nil {
		return ref.Ref{}, fmt.Errorf("payload: Options.SHA256: %w", err)
	}
	var s session
	open := map[string]any{"topic": topic, "size": size, "sha256": sum, "content_type": c.ContentType,
		"enc_key_id": c.KeyID, "enc_alg": c.Algorithm}
	for _, k := range []string{"content_type", "enc_key_id", "enc_alg"} {
		if open[k] == "" {
			delete(open, k)
		}
	}
	if err := c.call(ctx, http.MethodPost, "/v1/uploads", open, &s); err != nil {
		return ref.Ref{}, fmt.Errorf("payload: open an upload session: %w", err)
	}
	if s.ID == "" {
		return ref.Ref{}, errors.New("payload: the upload session's answer has no id")
	}
	if s.PutURL == "" {
		s.PutURL = "/v1/uploads/" + url.PathEscape(s.ID)
	}
	if s.CompleteURL == "" {
		s.CompleteURL = "/v1/uploads/" + url.PathEscape(s.ID) + ":complete"
	}
	part := s.PartSize
	if part <= 0 {
		part = DefaultPartSize
	}
	h := sha256.New()
	if err := c.send(ctx, s, body, size, part, h); err != nil {
		c.abort(s)
		return ref.Ref{}, err
	}
	if got := ref.SumHex([32]byte(h.Sum(nil))); got != sum {
		c.abort(s)
		return ref.Ref{}, fmt.Errorf("%w: the body's SHA-256 is %s, the session was opened with %s", ErrChecksum, got, sum)
	}
	var done completed
	if err := c.call(ctx, http.MethodPost, s.CompleteURL, struct{}{}, &done); err != nil {
		return ref.Ref{}, fmt.Errorf("payload: complete upload session %s: %w", s.ID, err)
	}
	r := ref.Ref{ID: done.Ref, Size: done.Size, SHA256: done.SHA256, ContentType: done.ContentType, KeyID: done.KeyID, Algorithm: done.Algorithm}
	if err := r.Validate(); err != nil {
		return ref.Ref{}, fmt.Errorf("payload: the completed session's reference: %w", err)
	}
	if r.Size != size || r.SHA256 != sum {
		return ref.Ref{}, fmt.Errorf("%w: the broker completed %d bytes with %s, %d with %s were sent", ErrChecksum, r.Size, r.SHA256, size, sum)
	}
	return r, nil
}

// send sends the body's size bytes by the path c.Transfer chooses,
// hashing them into h.
func (c *Client) send(ctx context.Context, s session, body io.Reader, size, part int64, h hash.Hash) error {
	direct := presignedCover(s.PresignedParts, size)
	switch c.Transfer {
	case TransferBroker:
		return c.putParts(ctx, s, body, size, part, h)
	case TransferPresigned:
		if !direct {
			return fmt.Errorf("%w (session %s)", ErrNoPresigned, s.ID)
		}
		_, err := c.putPresigned(ctx, s, body, h)
		return err
	}
	if !direct {
		return c.putParts(ctx, s, body, size, part, h)
	}
	seeker, seekable := body.(io.Seeker)
	var start int64
	if seekable {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seekable = false
		}
	}
	consumed, err := c.putPresigned(ctx, s, body, h)
	if err == nil || ctx.Err() != nil {
		return err
	}
	// The broker's PUTs must start at byte 0: the body is sent again
	// whole, which needs it rewound unless nothing of it was read.
	if consumed > 0 {
		if !seekable {
			return fmt.Errorf("%w; cannot fall back to the broker: %d bytes of a body that cannot seek were read", err, consumed)
		}
		if _, serr := seeker.Seek(start, io.SeekStart); serr != nil {
			return fmt.Errorf("%w; cannot fall back to the broker: rewind the body: %w", err, serr)
		}
	}
	if c.OnFallback != nil {
		c.OnFallback(err)
	}
	h.Reset()
	return c.putParts(ctx, s, body, size, part, h)
}

// presignedCover reports whether parts cover [0, size) in order.
func presignedCover(parts []presignedPart, size int64) bool {
	var off int64
	for i, p := range parts {
		if p.Number != int32(i+1) || p.Offset != off || p.Length <= 0 || p.URL == "" {
			return false
		}
		off += p.Length
	}
	return len(parts) > 0 && off == size
}

// putPresigned PUTs the body's parts to their presigned URLs (no
// credentials: the URL is the credential), hashing them into h. consumed
// is how many bytes of the body it read.
func (c *Client) putPresigned(ctx context.Context, s session, body io.Reader, h hash.Hash) (consumed int64, _ error) {
	for _, p := range s.PresignedParts {
		counted := newPartBody(io.TeeReader(io.LimitReader(body, p.Length), h))
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.URL, counted)
		if err != nil {
			return consumed, fmt.Errorf("payload: presigned PUT of part %d of session %s: %w", p.Number, s.ID, err)
		}
		req.ContentLength = p.Length
		resp, err := c.http().Do(req)
		if err == nil {
			err = answer(resp, nil)
		}
		n, werr := counted.count(ctx)
		consumed += n
		if err == nil {
			err = werr
		}
		if err == nil && n != p.Length {
			err = fmt.Errorf("the body ended after %d bytes of part %d", n, p.Number)
		}
		if err != nil {
			return consumed, fmt.Errorf("payload: presigned PUT of part %d of session %s: %w", p.Number, s.ID, err)
		}
	}
	return consumed, nil
}

// putParts streams the body in parts of part bytes, hashing them into h.
func (c *Client) putParts(ctx context.Context, s session, body io.Reader, size, part int64, h hash.Hash) error {
	for off := int64(0); off < size || (size == 0 && off == 0); off += part {
		n := min(part, size-off)
		counted := newPartBody(io.TeeReader(io.LimitReader(body, n), h))
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.url(s.PutURL), counted)
		if err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
			counted.Close() // the transport never sees it
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		if size > 0 {
			req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size))
		}
		c.authorize(req)
		resp, err := c.http().Do(req)
		if err == nil {
			err = answer(resp, nil)
		}
		read, werr := counted.count(ctx)
		if err == nil {
			err = werr
		}
		if err == nil && read != n {
			err = fmt.Errorf("the body ended after %d bytes of %d", off+read, size)
		}
		if err != nil {
			return fmt.Errorf("payload: PUT bytes %d-%d of session %s: %w", off, off+n-1, s.ID, err)
		}
		if size == 0 {
			break
		}
	}
	return nil
}

// partBody is one part's request body: it counts the bytes the HTTP
// transport read and tells when the transport is done with it. The
// transport may go on reading a request's body after Do returns (an early
// answer, a failed write), and closes it when it stops, possibly from
// another goroutine; until then neither the count nor the rest of the
// caller's stream, which the next part reads, may be touched (count).
type partBody struct {
	r      io.Reader
	n      int64 // written by the transport's goroutine until closed
	once   sync.Once
	closed chan struct{}
}

func newPartBody(r io.Reader) *partBody { return &partBody{r: r, closed: make(chan struct{})} }

func (b *partBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

// Close is the transport's signal that it reads no more.
func (b *partBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// count waits until the transport has closed the body and returns how
// many bytes it read.
func (b *partBody) count(ctx context.Context) (int64, error) {
	select {
	case <-b.closed:
		return b.n, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("the HTTP transport still holds the part's body: %w", ctx.Err())
	}
}

// abort deletes a session that will not complete (best effort: the broker
// aborts it at its time to live otherwise).
func (c *Client) abort(s session) {
	req, err := http.NewRequest(http.MethodDelete, c.url("/v1/uploads/"+url.PathEscape(s.ID)), nil)
	if err != nil {
		return
	}
	c.authorize(req)
	if resp, err := c.http().Do(req); err == nil {
		_ = resp.Body.Close() // the abort is best effort
	}
}

// Open returns the payload of rec: its value, or for an envelope a reader
// of its object that verifies size and SHA-256 as it reads (see doc.go).
func (c *Client) Open(ctx context.Context, rec *kgo.Record) (io.ReadCloser, error) {
	hs := make([]ref.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = ref.Header{Key: h.Key, Value: h.Value}
	}
	r, ok, err := ref.Parse(hs)
	if err != nil {
		return nil, fmt.Errorf("payload: record at %s-%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	if !ok {
		return io.NopCloser(bytes.NewReader(rec.Value)), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/v1/objects/"+r.ID), nil)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("payload: GET object %s: %w", r.ID, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		err := answer(resp, nil)
		return nil, fmt.Errorf("%w: %s: %v", ErrMissing, r.ID, err) //nolint:errorlint // the broker's answer is text
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("payload: GET object %s: %w", r.ID, answer(resp, nil))
	}
	return &verifier{body: resp.Body, want: r, h: sha256.New()}, nil
}

// verifier reads an object's bytes and checks them against its envelope.
type verifier struct {
	body io.ReadCloser
	want ref.Ref
	h    hash.Hash
	n    int64
	err  error // sticky
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.body.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	switch {
	case v.n > v.want.Size:
		v.err = fmt.Errorf("%w: %s: more than its %d bytes", ErrChecksum, v.want.ID, v.want.Size)
		return 0, v.err
	case errors.Is(err, io.EOF):
		if got := ref.SumHex([32]byte(v.h.Sum(nil))); v.n != v.want.Size || got != v.want.SHA256 {
			v.err = fmt.Errorf("%w: %s: read %d bytes with sha256 %s, want %d with %s", ErrChecksum, v.want.ID, v.n, got, v.want.Size, v.want.SHA256)
			return n, v.err
		}
		v.err = io.EOF
	case err != nil:
		v.err = fmt.Errorf("payload: read object %s at byte %d: %w", v.want.ID, v.n, err)
	}
	return n, v.err
}

func (v *verifier) Close() error { return v.body.Close() }

// call sends a JSON request to path and decodes a 2xx answer into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	return answer(resp, out)
}

// answer reads resp: a 2xx into out (when set), or an error with the
// broker's {"error":{"code","message"}}.
func answer(resp *http.Response, out any) error {
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 == 2 {
		if out == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			return nil
		}
		return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
		return fmt.Errorf("%s: %s: %s", resp.Status, e.Error.Code, e.Error.Message)
	}
	return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(raw))
}

func (c *Client) url(path string) string {
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path // a presigned or absolute URL the broker answered
	}
	return strings.TrimSuffix(c.Base, "/") + path
}

func (c *Client) http() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

func (c *Client) authorize(req *http.Request) {
	switch {
	case c.APIKey != "":
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	case c.Username != "":
		req.SetBasicAuth(c.Username, c.Password)
	}
}
