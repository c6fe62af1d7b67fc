// Package largeobj is the broker's service of large payloads: upload
// sessions that write a payload into the object store in parts, check its
// size and SHA-256, and answer an immutable reference (payload/ref) that a
// producer then publishes in a small envelope record.
//
// # Sessions
//
//	Begin ──► open ──PutPart…──► Complete ──► completed ──Claim──► published
//	            │                    │ (size or sha256 differ:     │
//	            │                    │  bytes deleted)             │ (kept while a live record
//	            ▼                    ▼                              │  references it: the ledger)
//	         aborted ◄─── Abort ─── aborted                        ▼
//	            ▲                                     condemned (release_due_ms; claims refused)
//	   Sweep: open past its TTL (multipart aborted)
//	   Sweep: completed past its TTL ──► expired (object deleted)
//	   Sweep: published, released by the ledger ──► expired (object deleted)
//
// Each session is one record in etcd (meta.Upload, meta/uploads.go); every
// change is a compare-and-swap on the record's revision, so HTTP requests
// of one session may land on any broker.
//
// # Parts
//
// The object is written as an S3 multipart upload (objstore.Multipart) of
// parts of PartSize bytes (8 MiB by default; S3 wants every part but the
// last to be at least 5 MiB). A PUT of a session carries bytes [a, b] of
// the payload (Content-Range); a must be the number of bytes received so
// far, and b+1-a a multiple of PartSize unless the range ends the payload:
// the broker streams each part straight to the store (it never holds more
// than the store client's buffer of it) and hashes it as it goes. After
// each part the running SHA-256 state (crypto/sha256 marshals it) is saved
// in the record with the part's ETag, so the next part may go to another
// broker. A PUT whose range does not start at the received count is
// refused (ErrOutOfOrder, naming the offset expected); a part that failed
// midway is sent again whole.
//
// Where the store presigns (S3), Begin also answers one URL per part; a
// client may upload some or all parts straight to the bucket. Complete
// then lists the parts from the store, assembles them, and reads the
// object back to hash it; when every byte came through brokers it uses the
// streamed hash and reads nothing back.
//
// # Object keys
//
//	large/<tenant, path-escaped>/<ref>
//
// tier.ParseKey refuses these keys, so tiering's scrub never touches them.
//
// # Deletion
//
// Sweep (run by every broker on an interval; the transactions make
// concurrent sweeps safe) aborts the multipart upload of a session never
// completed past its TTL, and deletes the object of a session completed but
// not published past its TTL (state expired: a later Claim gets
// ref.ErrExpired). The state changes first, then the bytes go, so a Claim
// racing the sweep either publishes (and the sweep skips the session) or
// sees ErrExpired. Records of aborted and expired sessions are kept for
// Config.Retain, then deleted. A published object is deleted only when the
// reference ledger releases it (Config.Release, by default Service.Release
// in ledger.go): every Claim records (topic, partition) in the ledger in the
// same transaction that publishes the session, before the record is
// appended; the partitions' leaders fold the entries against their log
// starts; once none is left the object is condemned, and after Config.Grace
// it goes. tier/doc.go ("Large objects") states the invariant.
//
// # Quotas
//
// Begin and Complete hold a tenant's large objects to object_storage_bytes
// and, with its logs, to storage_bytes; quota.go says which sessions'
// bytes count and when they stop counting. The sums are per-tenant
// counters in etcd that every write of a session record moves in its own
// transaction (meta/upload_bytes.go), so a check reads one key however
// many records are kept; Run and each Sweep recount them from the records.
package largeobj
