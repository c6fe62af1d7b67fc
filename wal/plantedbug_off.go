//go:build !sluice_planted_nosync

package wal

// plantedSkipJournalSync is false in every real build. The chaos suite
// builds a broker with the tag sluice_planted_nosync (plantedbug_on.go) to
// show that its crashes really lose what was not fsynced, and that its
// checker sees the acknowledged records such a broker loses (docs/chaos.md).
const plantedSkipJournalSync = false
