// Package netconn owns the plumbing of the broker's Kafka connections
// below the protocol: the bounds on how many may be open, in all and per
// client IP (Limiter), when an idle one is closed (Activity, IdleReader,
// ErrIdle), and the wrappers the inter-broker listener hands a connection
// through to its HTTP server (Peeked, CloseHook, Queue).
//
// The package is pure of the broker: the caller passes the limits from its
// config and the names its metrics give a refusal (Reasons), and does the
// counting and logging. Package kafka is its only user.
package netconn
