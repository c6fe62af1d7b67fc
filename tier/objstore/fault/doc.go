// Package fault wraps any objstore.Store and injects the failures object
// storage has in production, from a seeded generator, so that tiering tests
// can drive uploads and reads through them and reproduce a failure by seed:
//
//   - latency: every call waits Latency plus up to Jitter (or until its
//     context ends);
//   - server errors: an HTTP 500 InternalError, before the call reaches the
//     inner store (retriable);
//   - throttling: an HTTP 503 SlowDown, before the call (retriable);
//   - timeouts: the call blocks until its context's deadline and returns the
//     context's error, or, without a deadline, for Config.MaxBlock and then
//     returns a timeout error (retriable); it never blocks forever;
//   - lost responses (Put only): the object is stored in the inner store, then
//     a retriable error is returned, as when a response is lost on the way;
//   - truncated bodies (Get only): fewer bytes than the range asked for,
//     without an error, as a proxy or a cut connection may do; only the
//     caller's checksums can tell;
//   - down: every call fails at once with a refused connection (retriable),
//     until SetDown(false).
//
// Rates are per operation (Set) and can change while the store is in use.
// Every injected fault is counted by kind (Count). A Store with no faults set
// passes every call through unchanged.
package fault
