// Package chaos is Sluice's fault-injection suite (issue 11), in the style of
// Jepsen's Kafka analyses. It drives real sluiced processes, etcd and an S3
// server over the wire with franz-go clients, injects faults, records a
// history of everything the clients saw, and checks the history against the
// contract of the README's guarantees. It never imports broker, wal, tier or meta
// internals (depguard enforces it): what it knows comes over the Kafka
// protocol, the HTTP API and process control.
//
//	chaos/history   the history: event types, the JSON-lines format below, Recorder, Reader
//	chaos/checker   Check(events) → Report: the anomalies below, counted, with excerpts
//	chaos/netproxy  userspace TCP proxy for network faults (drop, delay, blackhole, cut)
//	chaos/s3fault   HTTP proxy for S3 protocol faults (500, SlowDown, lost responses, short GETs, latency)
//	chaos/cluster   process control of a three-broker cluster, its etcd and S3 server
//	chaos/workload  the keyed workload: idempotent producers, a consumer group, readers
//	chaos/replicas  every replica's log of a partition, read over the wire
//	chaos/runner    one scenario end to end: cluster, workload, faults, drain, check
//
// This file is the one place where the history format and the anomaly
// definitions are written down; the code points here.
//
// # History format, version 1
//
// A history is UTF-8 text, one JSON object per line ("\n" or "\r\n"; the last
// newline is optional). Line 1 is the header; each later line is one event.
// Every object has a "type"; an event's fields sit beside it, never nested.
//
//	{"type":"header","version":1,"start_unix_nano":1754000000000000000,"topic":"chaos","seed":42}
//	{"type":"send","process":1,"key":"k3","value":"k3-00042","partition":3,"outcome":"ok","offset":17,"leader_epoch":2,"invoke":1200,"complete":5300}
//	{"type":"poll","process":7,"consumer":"group","group":"g","member":"m-7","generation":4,"partition":3,
//	 "records":[{"offset":17,"key":"k3","value":"k3-00042","leader_epoch":2}],"invoke":5400,"complete":5600}
//
// Reading: version is checked first. A reader reads version 1 only and
// rejects any other with ErrVersion before it looks at other fields, so a
// newer history fails loudly instead of being misjudged. Within a version the
// fields are fixed: an unknown field or type, an invalid value (below), an
// empty line, trailing data or a second header is ErrMalformed, reported with
// its line number; the reader stops there and never skips a line. Adding a
// field or an event type, or changing a meaning, takes a new version.
//
// Times (invoke, complete, at) are nanoseconds since start_unix_nano on the
// runner's monotonic clock, with 0 <= invoke <= complete. Offsets, epochs and
// generations that do not apply are -1, as Kafka spells "none". Fields in
// brackets are omitted when empty.
//
//	type         fields
//	send         process key value partition outcome offset leader_epoch [error] invoke complete
//	poll         process consumer [group] [member] generation partition records invoke complete
//	commit       process group [member] generation partition offset [reset] outcome [error] invoke complete
//	assign       process group member generation partitions at
//	revoke       process group member generation partitions at
//	seek         process partition offset at
//	replica-log  partition broker log_start high_watermark entries
//	tiered-read  process partition from to records invoke complete
//	fault-start  id name target [params] at
//	fault-stop   id name target [params] at
//	final        partition log_start high_watermark at
//
//	record  {"offset","key","value","leader_epoch"}   leader_epoch -1 when the client did not say
//	entry   {"offset","digest","epoch"}               digest = history.Digest(key, value)
//
// The fields mean:
//
//   - outcome: "ok" (definitely happened; a send then has its offset >= 0),
//     "fail" (definitely did not: a Kafka error that guarantees nothing was
//     appended or committed; error names it, offset is -1) or "info" (unknown:
//     timeout, lost connection; offset -1). The runner classifies errors;
//     when in doubt, info.
//   - consumer: "group" (a subscribed member: group, member, generation >= 0),
//     "reader" (assigned partitions, positioned by seek events) or "drain"
//     (the final drain; generation -1 and no group for both).
//   - commit offset is the next offset to consume; reset marks an explicit
//     reset (admin or HTTP), the only commit allowed to move it backwards.
//     A commit from outside the group has generation -1.
//   - assign/revoke are recorded in the member's rebalance callbacks.
//   - replica-log is one broker's log of a partition at the end: the entries
//     in [log_start, high_watermark) as that replica knows them. One replica
//     may be split over several events with the same range.
//   - tiered-read is a re-read from object storage after local deletion: all
//     records found in [from, to).
//   - final is written once per partition, after the faults healed, the
//     producers stopped and the drain read the partition from its log start
//     to high_watermark.
//
// What the runner promises, and the checker relies on: values are unique per
// send; a client restarted after a crash takes a new process id; one producer
// process issues its sends from one goroutine; a client poll returning
// several partitions is recorded as one poll event per partition (empty ones
// may be left out); a consumer whose position moves other than by reading (a
// seek, or the client's own reset after OFFSET_OUT_OF_RANGE) records a seek;
// the drain is a fresh reader per partition; every partition sent to, polled
// or re-read from the tier has a final event.
//
// # Anomalies
//
// Terms. An acknowledged send has outcome ok. A read is a record returned by
// a poll of any consumer kind (tiered reads and replica logs are not reads).
// The final log of partition p is what the drain returned for p (the first
// value read at each offset), with LS and HW from p's final event; DE, the
// drain's end, is one past the highest offset the drain returned, capped at
// HW (LS if it returned nothing). Below DE an offset missing from the final
// log holds no record (a control batch, or a loss). "Before" is real time on
// the runner's clock: A before B when A completed (or happened, for events
// with "at") before B was invoked. Jepsen's names come first.
//
//   - lost-write: an acknowledged send at offset o >= LS of p with o >= HW;
//     or o < DE and the final log does not hold its value at o; or
//     DE <= o < HW and its value was read, but never at (p, o). Also a value
//     read at (p, o), o >= LS, with o >= HW, or with o < DE where the final
//     log holds no record (where it holds another value, that is
//     inconsistent-offsets). One per (p, o, value). Unknown outcomes are never
//     lost: only what was acknowledged or seen must stay.
//   - unseen: an acknowledged send with LS <= o < HW, not a lost write, whose
//     value no poll returned. By the definitions above this only happens for
//     DE <= o: the drain stopped short of the HW.
//   - duplicate: a value read at two or more (partition, offset) positions.
//     One per value.
//   - inconsistent-offsets: two or more values read at one (partition,
//     offset). One per position.
//   - nonmonotonic-send: one producer process's acknowledged sends to one
//     partition, in invoke order, must get increasing offsets. Invoke order is
//     the order the process issued them; the idempotent producer keeps it per
//     partition with up to 5 requests in flight, and with max in-flight 1 it
//     is also completion order. One per consecutive pair whose offsets do not
//     increase.
//   - poll-skip and nonmonotonic-poll: a consumer's session on a partition
//     is what it read since its position was last set. A session starts at a
//     seek on that partition, or at the first poll after an assign or revoke
//     of that process, or when a poll's consumer kind, group, member or
//     generation differs from the session's. Within a session each record,
//     in order, is judged against the next expected offset N (the previous
//     record's offset + 1, or the seek's offset): an offset below N is
//     nonmonotonic-poll; an offset above N with a final-log record in
//     [N, offset) is poll-skip. One per record judged so. The first record of
//     a session without a seek is not judged here (handover-skip is).
//   - aborted-read (Jepsen's G1a): a read value whose send definitely
//     failed. One per value.
//   - unexpected-read: a read value that no send produced, or that was read in
//     another partition or with another key than its send's. One per value.
//
// Sluice's own:
//
//   - replica-divergence: at offset o of p, among the replicas whose
//     [log_start, high_watermark) contains o (at least two), one has an entry
//     and another none, or their digests differ, or their epochs differ where
//     both are known. One per (p, o).
//   - stale-generation-commit: an accepted commit (ok, not a reset,
//     generation G >= 0) invoked after an assign of generation G' > G to any
//     member of its group. One per commit.
//   - offset-regression: per group and partition, a floor starts unset; a
//     reset (ok or info) sets it to the reset's offset when it is invoked; an
//     accepted non-reset commit raises it to its offset when it completes, if
//     it was invoked after the last reset. An accepted non-reset commit whose
//     offset is below the floor when it is invoked is an offset-regression.
//     At equal times: resets, then checks, then completions. One per commit.
//   - handover-skip: the first poll with records of a group member's session
//     (one not started by a seek) on p, invoked at t, starts at F. U is the
//     highest offset the group may have committed for p by then: the maximum
//     over commits with outcome ok or info invoked before t, where a reset
//     (ok or info) discards the commits that completed before it was
//     invoked. If F > U and the final log has a record in [U, F), that is a
//     handover-skip. Not judged while nothing was committed (the start then
//     follows auto.offset.reset).
//   - epoch-regression: in offset order, a record whose known leader epoch
//     is lower than the previous known one, in the final log or in one
//     replica's log. One per step down.
//   - tiered-read-mismatch: for a tiered read of p over [from, to): a
//     returned record at o >= HW; a returned record at LS <= o < DE where the
//     final log holds no record or another key or value; an offset in
//     [max(from, LS), min(to, DE)) where the final log has a record the
//     tiered read did not return. One per offset. [DE, HW) is not judged.
//
// A report also lists what it could not check: a partition without a final
// event, a value sent twice. Report.OK is false then too, so a run whose
// drain did not finish cannot pass.
//
// # Large payloads
//
// The large-payloads family (chaos/runner/faults_large.go) records outside
// the history: its side producer's acknowledged envelopes (reference,
// size, sha256, partition, offset), the uploads whose publish it dropped
// on purpose (orphans), the references its payload/consume group read to
// a verified end, the group's committed offsets, the side topic's final
// log read from its start, and every acknowledged object read back through
// a broker after the heal. chaos/checker.CheckPayloads judges them, one
// anomaly per reference, as Result.Violations:
//
//   - payload-lost: an acknowledged envelope not in the final log at its
//     (partition, offset) with its reference, or whose object cannot be
//     read back.
//   - payload-corrupt: an acknowledged envelope's object reads back with
//     another size or sha256.
//   - orphan-published: an upload whose publish was never attempted is
//     named by a record of the final log.
//   - commit-past-unverified: the group committed a partition past an
//     acknowledged envelope its handler never read to a verified end.
//
// A publish whose outcome is unknown is neither acknowledged nor an
// orphan. The group not having committed every partition's end a minute
// after the heal is a violation too.
//
// # Poison messages
//
// The poison family (chaos/runner/faults_poison.go) records outside the
// history: its side producer's acknowledged records (topic, partition,
// offset, key, message_id, kind: ok, flaky or poison), every processing by
// its HTTP queue consumers and every keys:skip and keys:resume its operator
// asked, in one order (a processing is recorded before its ack, an
// operator's step before its request), and the dead-letter topics read
// from their start after the run, each record's sluice.retry.* headers
// parsed. chaos/checker.CheckPoison judges them as Result.Violations:
//
//   - poison-lost: an acknowledged record neither processed nor in a
//     dead-letter topic (at least once broken).
//   - dead-letter-without-history: a dead letter of an acknowledged record
//     whose headers do not parse, whose history is empty or shorter than
//     its attempts, that has no dead reason, or that names another source
//     partition and offset.
//   - healthy-dead-lettered: a record that never failed past its first
//     delivery (ok or flaky) is in a dead-letter topic.
//   - strict-order: on the per-key-strict topic, a record processed before
//     an acknowledged record of its key at a lower offset was processed or
//     skipped (keys:skip asked). This covers keys never paused (offset
//     order) and the poison key (nothing after the paused record before a
//     skip, or before the record itself once resumed). Redelivery of
//     records already processed is allowed.
//
// Acknowledged records not settled (processed or dead-lettered) two
// minutes after the heal are a violation too.
package chaos
