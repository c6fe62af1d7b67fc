// Package redriveapi is dead-letter redrive (issue 22): a job that
// publishes a DLQ's dead letters again, to their source topic or to a
// shadow group's topic (to validate a repaired consumer first), at a rate
// per partition, each exactly once, and reports its progress.
//
//	POST /v1/dlq/{dlq}/redrives   {target, from_offset?, to_offset?, from_ms?, to_ms?,
//	                               message_key? | key_base64?, error_class?, rate?}
//	                              → 202 the job (View), its id; 409 redrive_running (naming
//	                                the job) while another runs on the same DLQ and target
//	GET  /v1/dlq/{dlq}/redrives   → 200 {redrives: [View]}, newest first
//	GET  /v1/redrives/{id}        → 200 View
//	POST /v1/redrives/{id}/cancel → 200 View (state cancelled, or the state it ended in)
//
//	View: {id, dlq, target, state: running|cancelled|done|failed, reason?, scope, rate,
//	       created_ms, finished_ms?, runner? (node id), total, decided, redriven,
//	       deduped, skipped, partitions: [{partition, start, end, cursor, redriven,
//	       deduped, skipped}]}
//
// (The issue spells them POST /v1/dlq/{dlq}:redrive and
// /v1/redrives/{id}:cancel; Go's mux takes a path value only as a whole
// segment, and the scope and ACL stages read the DLQ's name from it.)
//
// The scope is frozen when the job starts: each DLQ partition from
// max(log start, from_offset) to min(its high watermark then, to_offset);
// records dead-lettered later are not taken. Within it a record is
// redriven when it was dead-lettered in [from_ms, to_ms) (its
// sluice.retry.due.ms), has key message_key and last error class
// error_class (each when given); the others are skipped. A copy goes to
// the dead letter's source partition (modulo the target's partitions),
// keeps key, value, timestamp, message_id and its other headers, loses its
// sluice.retry.* headers (the history stays in the DLQ) and carries
// sluice.redrive.source = "<id>/<dlq partition>/<dlq offset>" (queue/redrive.go).
//
// A job is a record in etcd (meta/redrives.go); any broker runs it: the
// first to claim it (a key bound to its registration lease). When that
// broker stops or dies, its lease ends and another broker claims the job
// and resumes from the recorded progress; runner.go states why no dead
// letter is published twice across that, and the one window where a copy
// can be (a runner cut off from etcd).
//
// A repeated redrive does not publish again what an earlier one did,
// without storing anything per offset (dedupe.go): jobs on one DLQ and
// target run one at a time (the API refuses a second while one runs; of
// two started at once, the later waits for the earlier), and a job that
// starts loads the ended ones with their final progress. A dead letter an
// earlier job decided (its offset below that job's recorded cursor) and
// took (that job's frozen scope matches it) is counted deduped; so is one
// whose copy naming an earlier job is on the target past that job's
// cursor (its runner died before recording it: the target is read from
// that job's marks, as a resumed runner reads its own). The window is the
// same as for a failover: an earlier runner cut off from etcd whose
// publish is acknowledged only after the later job read the target.
package redriveapi
