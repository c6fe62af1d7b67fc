// Package frames reads Kafka request frames off a connection against the
// broker's request memory (Kafka's queued.max.request.bytes).
//
// Memory is the budget every connection shares: a frame reserves its bytes
// as they arrive, charged to a share (a tenant, the unauthenticated
// connections, or the inter-broker listener), and each active share is
// guaranteed an equal part of it; memory.go explains how shares borrow and
// why each has one overdraft. Reader reads one connection's size-prefixed
// frames into that memory and enforces the minimum receive rate that
// closes a connection whose frame stalls (reader.go). SkipTags reads past
// the tagged fields of a flexible request header (header.go).
//
// The package is pure of the broker: the caller names each frame's share,
// passes the limits from its config, and decides in onSlow how a slow
// connection is counted and closed. Package kafka is its only user.
package frames
