//go:build sluice_planted_nosync

package wal

// plantedSkipJournalSync: a deliberately broken broker for the chaos suite's
// second planted-bug check (docs/chaos.md). The journal reports each round
// durable without its fdatasync, so acknowledged batches live only in the
// page cache; a crash that loses unsynced writes (sluiced
// --crash-loses-unsynced, then kill -9) loses them. Never in a real build.
const plantedSkipJournalSync = true
