// Package s3fault is the S3 server of the chaos suite as the brokers see it
// when it misbehaves: an HTTP reverse proxy in front of a real S3-compatible
// server (versitygw) that injects faults of the S3 protocol into the
// requests of real sluiced processes. chaos/netproxy breaks the TCP links to
// the same server (cut, blackhole, stall, delay), but a TCP proxy cannot
// answer a request with a well-formed SlowDown, nor let a PUT commit and
// then lose its answer: those need a proxy that knows where one request
// ends and its response begins. tier/objstore/fault injects the same kinds
// in process, under the objstore interface; this package reaches the broker
// binaries themselves, through their AWS SDK, its retryer and its checksums.
//
// # Model
//
// The brokers' object store endpoint is the proxy's URL; they address
// objects path-style (/bucket/key), sign every request with SigV4 as if the
// proxy were the server, and the proxy forwards it unchanged to the
// upstream. Unchanged matters: SigV4 signs the method, the path as encoded,
// the query, the Host header and the x-amz-* headers, so the proxy keeps the
// raw path, passes the client's own Host value on (the upstream then checks
// the signature against the name the client used, the proxy's address),
// drops only hop-by-hop headers and adds none. Bodies are streamed both
// ways, never held: a PUT of several MiB goes to the upstream as the client
// sends it.
//
// Each request is classified (classify.go) as one operation: GET of an
// object, ranged GET (a Range header), HEAD of an object, PUT of an object
// (a multipart part or a copy too), DELETE of an object (or a POST ?delete
// batch), LIST (a GET of a bucket, ListObjects v1 or v2), or other: bucket
// and service calls, multipart control and subresources such as ?acl, which
// pass untouched. Faults are set per operation (Faults, OpFaults) and can
// change at any time; Heal removes them all.
//
// For each request the proxy draws, in this order:
//
//  1. latency: it holds the request Delay ± Jitter (uniform, at least 0)
//     before doing anything else;
//  2. an error answer, with probability InternalErrorRate or SlowDownRate
//     (one draw, so the rates are exact);
//  3. if forwarded, the fate of the response, with probability
//     LostResponseRate or TruncateRate (one draw).
//
// Random values come from one PCG generator seeded by Config.Seed, under
// Proxy.mu, and every request draws three whatever its faults, so requests
// made one after another meet the same decisions under the same seed.
// Concurrent requests take their draws in arrival order, which the proxy
// does not control.
//
// # Faults, and what each one is for
//
//   - Latency (Delay, Jitter): slow object storage. The broker's uploads and
//     remote reads must not block produce or fetch on local data, and its
//     deadlines must end calls cleanly, so an upload that outlives its
//     deadline is retried, not half done.
//   - InternalError (500) and SlowDown (503): the request is not forwarded;
//     the proxy answers as S3 does, with an XML error document
//     (<Error><Code>SlowDown</Code><Message>…</Message><Resource>…</Resource>
//     <RequestId>…</RequestId></Error>, Content-Type application/xml; a
//     HEAD gets the status alone) and an x-amz-request-id header. Both are
//     retriable: the SDK's retryer must retry them with backoff (SlowDown is
//     S3's throttling, and a client that retries it at once makes it worse),
//     and the broker must keep a segment local until an upload succeeds. The
//     request body, if any, is read and discarded first, so the client reads
//     the error rather than a connection reset mid-upload.
//   - Lost response: the request is forwarded and the upstream's response
//     read to its end, so the operation really happened (a PUT committed, a
//     DELETE deleted), and then the client's connection is closed with no
//     response at all. The client sees a broken connection after the write
//     took effect, as when a response is lost on the way. The client cannot
//     tell this from a failure; the fault checks that a retried write is
//     idempotent: the SDK retries the same PUT under the same key, which
//     rewrites the same bytes, and a retried DELETE of a gone key succeeds.
//     When the broker gives up on an upload attempt, the object that did
//     commit under that attempt's key is left behind as an intent, which
//     must be resolved or scrubbed (tier/doc.go), never leaked or counted as
//     data.
//   - Truncated body (GET and ranged GET only): the request is forwarded,
//     the status and headers are sent as the upstream gave them, with the
//     whole Content-Length, then half of the body, and the connection is
//     closed. The client reads an unexpected EOF. Only a successful response
//     with a non-empty body of known length is cut; others pass whole. It
//     checks that a tiered read never hands out a short segment or index: the
//     SDK's length check, the segment's CRCs and the broker's own retry of a
//     GET whose body broke off must catch it.
//
// An upstream that gives no response at all is answered 502 BadGateway with
// the same kind of XML document and counted in Stats.UpstreamErrors; it is
// not an injected fault.
//
// Stats counts requests per operation, faults injected per kind, requests
// forwarded and upstream errors, for the chaos report.
//
// # Goroutines and locks
//
// A Proxy owns an http.Server (its accept loop and one goroutine per client
// connection) and an http.Transport to the upstream. Close closes the
// listener and every client connection, which cancels the requests in
// flight and their upstream calls, ends injected delays, and waits for every
// handler and for the server's loop. Proxy.mu guards the faults, the
// generator and the closed flag; no lock is held while a request waits or
// does I/O. Counters are atomics.
package s3fault
