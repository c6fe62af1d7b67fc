// Package objstore is the object-storage seam of package tier: the small
// interface (Store: put, ranged get, head, list, delete) through which tiering
// reaches a bucket, the errors every implementation returns, the options they
// share and the classifier that tells a transient failure from a final one.
//
// # Layout
//
// The interface lives here and imports nothing of ours; each implementation is
// a subpackage that imports it, and the one function that needs them all sits
// in a subpackage above them, so there is no import cycle:
//
//	tier/objstore            Store, Info, Options, ErrNotFound, IsRetriable, ValidKey
//	tier/objstore/mem        a map in memory (mem://)
//	tier/objstore/file       a directory on a local file system (file:///abs/path)
//	tier/objstore/s3         S3 or an S3-compatible service, aws-sdk-go-v2 (s3://bucket/prefix)
//	tier/objstore/fault      a wrapper around any Store that injects seeded faults
//	tier/objstore/open       URL: picks one of the above by the URL's scheme
//	tier/objstore/storetest  the conformance suite every Store passes (for tests)
//	tier/objstore/s3test     starts Versity's S3 gateway for tests
//
// # Contract
//
// Keys are UTF-8 paths of segments separated by '/' (ValidKey): no empty, "."
// or ".." segment, no leading or trailing '/', at most MaxKeyLen bytes. The
// file store maps segments to directories, so one key may not be a proper
// prefix-by-segments of another ("a" and "a/b" cannot both exist there); the
// tiering keys never are.
//
//   - Put stores a whole object atomically: a reader sees the old object or the
//     new one, never a part. A Put that returns an error may still have
//     committed (a lost response); callers that retry write the same bytes, or
//     a fresh key.
//   - Get(key, off, n) returns bytes [off, off+n) of the object, or [off, end)
//     when n < 0. A range that runs past the end is cut short without error;
//     off == size returns no bytes; off > size or off < 0 is ErrInvalidRange.
//     A short read (a Get that returns fewer bytes than it should, without
//     error) is possible on a faulty network; callers check their checksums.
//   - Head returns the size and modification time.
//   - List calls fn for every key with the prefix, in lexical (byte) order,
//     and stops at fn's first error, which it returns.
//   - Delete of a missing key succeeds.
//   - Get and Head of a missing key return an error that matches ErrNotFound.
//
// # Errors
//
// ErrNotFound, ErrInvalidKey and ErrInvalidRange are final. IsRetriable
// reports whether a failure is transient (a deadline, a 5xx, throttling, a
// refused or reset connection): the caller may try the same call again.
// A caller's own cancellation is never retriable, nor is anything it does not
// recognise, so corruption found by a caller never looks transient.
//
// # Deadlines
//
// Every call of a store that does network I/O runs under Options.Timeout on
// top of the caller's context, so no call can hang; the S3 store retries
// transient failures inside that deadline, up to Options.MaxAttempts attempts.
package objstore
