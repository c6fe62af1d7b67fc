// Package ref is the convention by which a Kafka record points at a large
// payload kept in object storage instead of carrying it.
//
// A payload above a topic's max.inline.bytes (256 KiB by default) is first
// uploaded to the broker's object store through an upload session (HTTP
// POST /v1/uploads, then PUT the bytes, then :complete). Completing the
// session answers a reference; the producer then publishes a small envelope
// record whose headers name the object:
//
//	header               value (UTF-8)                         required
//	sluice.ref           the reference: 1–64 of [A-Za-z0-9_-]   yes
//	sluice.size          the payload's size in bytes, decimal   yes
//	sluice.sha256        its SHA-256, 64 lowercase hex digits   yes
//	sluice.content-type  a media type, at most 255 bytes        no
//	sluice.enc-key-id    the producer's key id, at most 255     no
//	sluice.enc-alg       the producer's algorithm, at most 64   no
//
// The record's value is empty or a short preview the producer chose; it is
// never the payload. A header name appears at most once. The broker checks
// each produced reference against its completed upload sessions: the
// reference must exist, belong to the producing tenant, not have expired
// unpublished, and match the size and checksum that were verified when the
// session completed. A consumer reads the object (GET /v1/objects/{ref},
// with Range) and verifies the SHA-256 as it reads.
//
// Encryption metadata travels as the producer wrote it; the broker never
// sees keys and does not interpret these two headers.
//
// Clients in any language can follow the convention: the header names and
// value formats above are the whole contract. Parse is the broker's and the
// Go client's reader of it; Headers its writer.
package ref
