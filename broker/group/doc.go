// Package group is the classic Kafka consumer-group state machine: members,
// generations, the join and sync rounds of a rebalance, heartbeats and
// session expiry, static membership, and the committed offsets of one group
// with their expiry. It is pure: it does no I/O, starts no goroutine and
// reads no clock. Time is an argument of every step, timeouts are deadlines
// that Tick(now) checks, and requests that must wait (JoinGroup, SyncGroup)
// are parked under a Ticket chosen by the caller and answered later through
// the outbox (TakeCompletions). The broker runs one Group per group id under
// a lock and turns completions into Kafka responses.
//
// # States
//
//	Empty ──join──▶ PreparingRebalance ──all joined or rebalance timeout──▶ CompletingRebalance
//	  ▲                  ▲      │                                                │ leader syncs
//	  │                  │      └──no member left──▶ Empty                       ▼
//	  │                  └──join, leave, session expiry, sync timeout──────── Stable
//	  └─ (Empty with no offsets and no members may be deleted: Dead)
//
// Invariant: generation only increases; it increases once per completed join round.
// Invariant: a parked request is answered exactly once: by its completion, by
// an error when its member is removed or fenced, or by a newer request of the
// same member replacing it.
// Invariant: in CompletingRebalance and Stable the leader is a member and
// every member agreed to the selected protocol.
// Invariant: a commit is accepted only from a current member with the current
// generation, or, with generation < 0 and no member id, while the group is Empty.
//
// # Concurrency
//
// A Group is not safe for concurrent use; its owner serialises every call.
package group
