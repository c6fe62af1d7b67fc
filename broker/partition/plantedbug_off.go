//go:build !sluice_planted_bug

package partition

// plantedAckBeforeQuorum is false in every real build. The chaos suite
// builds a broker with the tag sluice_planted_bug (plantedbug_on.go) to show
// that its checker catches a broker that answers acks=all before the quorum
// holds the batch (docs/chaos.md).
const plantedAckBeforeQuorum = false
