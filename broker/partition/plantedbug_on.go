//go:build sluice_planted_bug

package partition

// plantedAckBeforeQuorum: a deliberately broken broker for the chaos suite's
// planted-bug check (docs/chaos.md). acks=all is answered once the leader
// alone has the batch durable, as acks=1 is; a leader lost before its
// followers copied it loses acknowledged records. Never in a real build.
const plantedAckBeforeQuorum = true
