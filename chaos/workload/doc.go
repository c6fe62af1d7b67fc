// Package workload is the chaos suite's keyed workload: the Kafka clients
// (franz-go, and optionally librdkafka) that drive a real cluster while
// faults are injected, and that record every operation they see into a
// chaos/history.Recorder, following the history format and the runner's
// promises of the chaos package doc (chaos/doc.go). It knows the cluster
// only over the Kafka protocol.
//
// # Clients
//
//   - Producers: Config.Producers idempotent producers (kgo's default
//     idempotence, acks=all), each one client and one goroutine issuing keyed
//     sends (keys k0..k{Keys-1}) at its share of Config.Rate. Key ki goes to
//     partition i mod Partitions, chosen by the workload (a manual
//     partitioner), so a send's partition is known before it is sent. Every
//     value is "<key>-<process>-<seq>", unique across the history. A producer
//     issues sends asynchronously from its one goroutine; the idempotent
//     producer keeps their order per partition with up to five requests in
//     flight, which chaos/doc.go's nonmonotonic-send definition allows (kgo
//     refuses any other in-flight limit with idempotence, so
//     MaxProduceRequestsInflightPerBroker is not set).
//   - librdkafka producers (Config.LibrdkafkaProducers, rdkafka.go): each an
//     idempotent confluent-kafka-python producer (acks=all) in a
//     subprocess, driven over its stdin with the same keys, partitions and
//     values, sharing Config.Rate; a send's invoke is taken before its line
//     is written and its completion when its delivery report is read. An
//     error report is info (librdkafka retries inside), a send never
//     handed over (the script gone) is fail, one without a report when the
//     script exits is info.
//   - Group members: Config.Members members of Config.Group, each one client
//     and one goroutine that polls, "processes" (records the poll), then
//     commits the offsets after what it processed before it polls again
//     (DisableAutoCommit, BlockRebalanceOnPoll, a synchronous commit). The
//     balancer is eager (range): every rebalance revokes everything and the
//     next session resumes at the group's committed offset, the model the
//     checker's handover-skip judges. (A cooperative member keeps its
//     in-memory position across generations, which handover-skip would
//     misjudge whenever its last commit failed.) Assign and revoke (and lost)
//     are recorded from kgo's callbacks with the member id and generation of
//     the assignment.
//   - Readers (Config.Readers): one client per partition, assigned directly,
//     starting at the partition's log start, listed just before and recorded
//     as a seek.
//   - The drain (Drain, after Stop): a fresh reader per partition reads from
//     the log start to the high watermark (ListOffsets), then records the
//     partition's final event.
//
// QueueMember (queue.go) is the one client here that speaks HTTP: a member
// of a group driven through the brokers' HTTP queue API, for the chaos
// poison family; it records nothing itself (its caller does).
//
// Every client has its own process id, allocated upward from
// Config.FirstProcess; a member restarted by RestartMember takes a new one.
//
// # Outcomes
//
// A send is ok when the broker acknowledged it (with its offset; kgo does
// not report a produced record's leader epoch, so it is -1). It is fail only
// for an error that guarantees the record was not written: a Kafka error
// that is deterministic for the record's bytes or its producer's rights, so
// no earlier attempt of the same record can have been written either
// (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
// INVALID_TIMESTAMP, INVALID_TOPIC_EXCEPTION, UNSUPPORTED_FOR_MESSAGE_FORMAT,
// UNSUPPORTED_COMPRESSION_TYPE, TOPIC_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED; the suite changes no ACLs), and only when
// kgo returned it as the record's own result rather than wrapped in a
// timeout or retry limit. Everything else is info: timeouts
// (kgo.ErrRecordTimeout), exhausted retries, connection errors, a closed
// client, a cancelled context, and every retriable Kafka error.
//
// A commit is recorded per partition. It is ok when the broker answered
// that partition without an error; fail only when the broker rejected it
// with an error that means it was not applied (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID,
// GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
// OFFSET_METADATA_TOO_LARGE, INVALID_COMMIT_OFFSET_SIZE, INVALID_GROUP_ID,
// STALE_MEMBER_EPOCH) and exactly one OffsetCommit request was written for
// it (a hook counts them): kgo retries a commit, and an earlier attempt
// whose answer was lost may have been applied. Everything else is info. Its
// member and generation are those of the request kgo sent.
//
// # Positions
//
// Consumers run with kgo's NoResetOffset: an OFFSET_OUT_OF_RANGE comes back
// to the workload, which lists the log start, moves the client there and
// records a seek; a reset kgo makes itself after detecting truncation
// (kgo.ErrDataLoss) is recorded as a seek to where it reset. One client poll
// is recorded as one poll event per partition in the order kgo returned
// them (empty ones left out), split where a seek on that partition falls
// between its records. A group member's poll is invoked, for the history,
// no earlier than the member's last assignment: kgo may hold a poll call
// across a rebalance, and the records it then returns were positioned by the
// new assignment. Known gap: a reader's or drain's exact start is clamped by
// kgo without a word if retention moves the log start between the listing
// and the first fetch; records below the final log start are outside every
// check, so this hides nothing the checker judges.
//
// # Concurrency
//
// Each client has one goroutine, started by Run (or RestartMember) and
// cancelled and waited for by Stop; a crashed member's client is closed on a
// goroutine Stop also waits for. kgo calls produce promises (serially per
// producer) and rebalance callbacks on its own goroutines; they only record
// and update atomics or fields under the member's mutex. The Recorder is
// safe for concurrent use. Workload.mu guards the member list and the
// stopped flag; counters are atomics.
package workload
