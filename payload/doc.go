// Package payload is the Go client of Sluice's large payloads: Put uploads
// a payload to the broker's object store through an upload session and
// publishes a small envelope record naming it with franz-go; Open reads a
// consumed record's payload, streaming the object of an envelope and
// verifying its size and SHA-256 as it reads.
//
// The envelope's header convention (sluice.ref, sluice.size,
// sluice.sha256, and optionally sluice.content-type, sluice.enc-key-id,
// sluice.enc-alg) is payload/ref's; README ("Publishing and consuming
// references") describes it for clients in other languages.
//
// # Put
//
//	POST {base}/v1/uploads {topic,size,sha256,content_type?,enc_key_id?,enc_alg?}
//	     → 201 {id, part_size, put_url, complete_url, expires_at, …}
//	PUT  {put_url}  Content-Range: bytes a-b/size   (part_size bytes each, the last shorter)
//	POST {complete_url}
//	     → 200 {ref, size, sha256, content_type, expires_if_unpublished}
//	produce {topic, key, value: preview, headers: the caller's + the envelope's}
//
// The session is opened with the payload's SHA-256, which the broker
// checks at completion. Put takes it from Options.SHA256, or computes it
// in a first pass when the body is an io.ReadSeeker (and seeks back);
// otherwise it refuses. The bytes are then streamed part by part, each
// part read straight from the body into its request (never held whole),
// and hashed again as they go: a body that changed between the passes is
// aborted (DELETE) before completion with ErrChecksum.
//
// # Transfer
//
// Where the broker's object store presigns (S3), the session's answer
// carries presigned_parts [{part_number, offset, length, url}], one URL
// per part covering the payload. Options.Transfer chooses the path:
//
//	TransferAuto       the presigned URLs when offered (the bytes go
//	                   straight to the bucket), else the broker's put_url
//	TransferBroker     always put_url (the broker streams each part)
//	TransferPresigned  always the presigned URLs; ErrNoPresigned without
//
// A presigned PUT carries no credentials (the URL is one). When one fails
// under TransferAuto (a bucket the client cannot reach, an expired URL),
// Put falls back to the broker: the broker's PUTs must start at byte 0, so
// the body is rewound to where Put began reading it (an io.Seeker), or
// sent from the start when none of it was read yet; a body read partly
// that cannot seek fails the upload. Options.OnFallback hears why. The
// broker's completion of presigned parts reads the object back to hash
// it; that of streamed parts uses the hash taken while streaming.
//
// A failed PUT is not retried (the body would have to be read again); Put
// aborts the session and returns the error. A failed produce leaves the
// completed session unpublished, and the broker deletes it after its time
// to live; Put may simply be called again.
//
// # Open
//
// A record without envelope headers is its own payload: Open returns its
// value. An envelope's object is fetched with GET {base}/v1/objects/{ref};
// the reader returns ErrChecksum instead of io.EOF when the bytes read do
// not have the envelope's size and SHA-256, and Open returns an error
// wrapping ErrMissing when the broker has no such object. A consumer that
// commits offsets itself should commit a record only after its payload
// read to io.EOF, so that a payload it could not read is read again.
//
// # Credentials
//
// Options.APIKey is sent as "Authorization: Bearer <key>", or
// Options.Username and Options.Password as HTTP Basic, the HTTP API's
// ways of authenticating a tenant's user; with neither the request is
// anonymous (a broker with security off).
package payload
