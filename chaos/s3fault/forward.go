package s3fault

// forward.go owns what passes between the client and the upstream: the
// outgoing request built from the incoming one, the response copied back,
// the S3 error documents the proxy answers itself, and abort, which closes a
// client connection without finishing its response.
//
// Invariant: what SigV4 signs reaches the upstream byte for byte: the
// method, the path as the client encoded it, the raw query, the Host header
// the client sent, and every end-to-end header (Authorization, X-Amz-Date,
// X-Amz-Content-Sha256, Content-Length, Content-MD5, ...). Only hop-by-hop
// headers (RFC 9110 §7.6.1) are dropped, and nothing is added that was not
// there, apart from the transport's framing.
// Invariant: a request body is streamed, never held: the upstream reads it
// straight from the client's connection.
// Invariant: a response the proxy cannot deliver whole is aborted (the
// connection closed), never ended cleanly short.

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// hopHeaders are the hop-by-hop headers, which belong to one connection and
// are never forwarded.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// dropHopHeaders removes the hop-by-hop headers from h, including those
// named by its Connection header.
func dropHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// roundTrip sends r to the upstream and returns its response. The request
// context is r's, so a client that leaves or a closing proxy ends the call.
func (p *Proxy) roundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = "" // a client request must not have one
	u := *p.upstream
	if path, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "//") {
		u.Opaque = path // the path exactly as the client encoded it (and signed it)
	} else {
		u.Path, u.RawPath = r.URL.Path, r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	out.URL = &u
	out.Host = r.Host // SigV4 signs the Host header: the upstream must see the client's
	dropHopHeaders(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // keep the transport from adding its own
	}
	out.Close = false
	out.TransferEncoding = nil // the transport frames by ContentLength, or chunks when it is -1
	if r.ContentLength == 0 {
		out.Body = http.NoBody // a non-nil body with length 0 would be sent chunked
	} else {
		out.Body = r.Body
	}
	out.ContentLength = r.ContentLength
	out.GetBody = nil
	p.stats.forwarded.Add(1)
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("s3fault: %s %s: %w", r.Method, r.URL.Path, err)
	}
	return resp, nil
}

// copyResponse sends resp's status and headers to the client (Content-Length
// among them, as the upstream sent it), then its body: all of it when
// limit < 0, else at most limit bytes (the headers still declare the whole
// length). A body that breaks off on either side aborts the client's
// connection; copyResponse reports whether it did.
func (p *Proxy) copyResponse(w http.ResponseWriter, resp *http.Response, limit int64) (aborted bool) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	dropHopHeaders(h)
	// Set nothing the upstream did not: a nil value suppresses a header the
	// server would otherwise add.
	for _, k := range []string{"Content-Type", "Date"} {
		if _, ok := resp.Header[k]; !ok {
			h[k] = nil
		}
	}
	w.WriteHeader(resp.StatusCode)
	src := &readErr{r: resp.Body}
	body := io.Reader(src)
	if limit >= 0 {
		body = io.LimitReader(src, limit)
	}
	if _, err := io.Copy(w, body); err != nil {
		// Either side broke off. If the client did, it is gone already; if the
		// upstream did, the client must not take the short body for a whole one.
		if src.err != nil {
			p.stats.upstreamErrors.Add(1)
		}
		p.log.Debug().Err(err).Msg("response copy broke off")
		abort(w, true)
		return true
	}
	return false
}

// readErr remembers the error, other than io.EOF, its reader returned, to
// tell a broken upstream from a broken client.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}

// abort closes the client's connection without finishing the response, so
// the client sees its response end early (started: what was written is
// flushed first), or none at all (!started: nothing was written, and
// nothing is, not even a status line).
func abort(w http.ResponseWriter, started bool) {
	rc := http.NewResponseController(w)
	if started {
		_ = rc.Flush() // Hijack would drop what the response writer still buffers
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		// HTTP/2, or a writer that cannot be hijacked: the server's own way
		// to abort a response.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// s3Error is the body of an S3 error response.
type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
}

// errorReplies are the errors the proxy answers itself, with the status and
// message S3 gives them.
var errorReplies = [numKinds]struct {
	status  int
	code    string
	message string
}{
	KindInternalError: {http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again."},
	KindSlowDown:      {http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate."},
}

// writeError answers r with the S3 error of kind k, without forwarding it.
// The request body is read and discarded first, so the client, which may
// still be sending it, reads the error rather than a reset connection.
func (p *Proxy) writeError(w http.ResponseWriter, r *http.Request, k Kind) {
	e := errorReplies[k]
	p.writeS3Error(w, r, e.status, e.code, e.message)
}

// writeBadGateway answers r when the upstream gave no response.
func (p *Proxy) writeBadGateway(w http.ResponseWriter, r *http.Request) {
	p.writeS3Error(w, r, http.StatusBadGateway, "BadGateway", "The proxy got no response from the S3 server.")
}

func (p *Proxy) writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := fmt.Sprintf("S3FAULT%016X", p.reqSeq.Add(1))
	body, err := xml.Marshal(s3Error{Code: code, Message: message, Resource: r.URL.Path, RequestID: id})
	if err != nil {
		panic(fmt.Sprintf("s3fault: marshal an error document: %v", err)) // fixed types: cannot fail
	}
	body = append([]byte(xml.Header), body...)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Request-Id", id)
	w.WriteHeader(status)
	if r.Method != http.MethodHead { // S3 answers a HEAD with the status alone
		_, _ = w.Write(body)
	}
}
