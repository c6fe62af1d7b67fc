package checker

import (
	"strings"
	"testing"
)

// goodPoisonRun: on the strict topic S key a, a poison record at 1 pauses
// the key, is skipped, and the key goes on; key b's poison record at 4 is
// resumed (repaired) and processed before b's next; on the relaxed topic R
// a poison record is dead-lettered after three attempts and a flaky one
// processed twice (a duplicate).
func goodPoisonRun() PoisonRun {
	return PoisonRun{
		Acked: []PoisonRecord{
			{Topic: "S", Strict: true, Partition: 0, Offset: 0, Key: "a", ID: "s0", Kind: PoisonOK},
			{Topic: "S", Strict: true, Partition: 0, Offset: 1, Key: "a", ID: "s1", Kind: PoisonPoison},
			{Topic: "S", Strict: true, Partition: 0, Offset: 2, Key: "b", ID: "s2", Kind: PoisonOK},
			{Topic: "S", Strict: true, Partition: 0, Offset: 3, Key: "a", ID: "s3", Kind: PoisonOK},
			{Topic: "S", Strict: true, Partition: 0, Offset: 4, Key: "b", ID: "s4", Kind: PoisonPoison},
			{Topic: "S", Strict: true, Partition: 0, Offset: 5, Key: "b", ID: "s5", Kind: PoisonOK},
			{Topic: "R", Partition: 1, Offset: 0, Key: "a", ID: "r0", Kind: PoisonPoison},
			{Topic: "R", Partition: 1, Offset: 1, Key: "a", ID: "r1", Kind: PoisonFlaky},
		},
		Events: []PoisonEvent{
			{Seq: 1, Kind: EventProcessed, Topic: "S", Offset: 0, Key: "a", ID: "s0"},
			{Seq: 2, Kind: EventProcessed, Topic: "S", Offset: 2, Key: "b", ID: "s2"},
			{Seq: 3, Kind: EventProcessed, Topic: "R", Partition: 1, Offset: -1, Key: "a", ID: "r1"},
			{Seq: 4, Kind: EventSkip, Topic: "S", Offset: 1, Key: "a", ID: "s1"},
			{Seq: 5, Kind: EventProcessed, Topic: "S", Offset: 3, Key: "a", ID: "s3"},
			{Seq: 6, Kind: EventResume, Topic: "S", Offset: 4, Key: "b"},
			{Seq: 7, Kind: EventProcessed, Topic: "S", Offset: 4, Key: "b", ID: "s4"},
			{Seq: 8, Kind: EventProcessed, Topic: "S", Offset: 5, Key: "b", ID: "s5"},
			{Seq: 9, Kind: EventProcessed, Topic: "R", Partition: 1, Offset: -1, Key: "a", ID: "r1"},
			// A redelivery after a crash: earlier records again.
			{Seq: 10, Kind: EventProcessed, Topic: "S", Offset: 3, Key: "a", ID: "s3"},
		},
		DLQ: []DeadLetter{
			{ID: "s1", Reason: "skipped", Attempt: 1, History: 1, SourceTopic: "S", SourcePartition: 0, SourceOffset: 1},
			{ID: "r0", Reason: "exhausted", Attempt: 3, History: 3, SourceTopic: "R", SourcePartition: 1, SourceOffset: 0},
		},
	}
}

func TestCheckPoison(t *testing.T) {
	got, cnt := CheckPoison(goodPoisonRun())
	if len(got) != 0 {
		t.Fatalf("a clean run: %v", got)
	}
	if cnt.Acked != 8 || cnt.AckedPoison != 3 || cnt.Processed != 6 || cnt.Duplicates != 2 || cnt.Skips != 1 || cnt.Resumes != 1 ||
		cnt.DeadLettered["skipped"] != 1 || cnt.DeadLettered["exhausted"] != 1 || cnt.OrderChecks != 6 {
		t.Fatalf("counts: %+v", cnt)
	}
	for _, c := range []struct {
		name, want string
		mutate     func(r *PoisonRun)
	}{
		{"lost", "poison-lost: r0", func(r *PoisonRun) { r.DLQ = r.DLQ[:1] }},
		{"lost after processing elsewhere", "poison-lost: s5", func(r *PoisonRun) { r.Events[7].ID = "other" }},
		{"no history", "dead-letter-without-history: r0", func(r *PoisonRun) { r.DLQ[1].History = 0 }},
		{"history short of attempts", "dead-letter-without-history: r0", func(r *PoisonRun) { r.DLQ[1].History = 2 }},
		{"unparsed headers", "dead-letter-without-history: s1", func(r *PoisonRun) { r.DLQ[0].Err = "bad header" }},
		{"wrong source", "dead-letter-without-history: s1", func(r *PoisonRun) { r.DLQ[0].SourceOffset = 7 }},
		{"healthy dead-lettered", "healthy-dead-lettered: s0", func(r *PoisonRun) {
			r.DLQ = append(r.DLQ, DeadLetter{ID: "s0", Reason: "exhausted", Attempt: 1, History: 1, SourceTopic: "S", SourceOffset: 0})
		}},
		// Key a's record at 3 processed before the skip of its poison record at 1.
		{"past a pause", "strict-order: S/0 key a: offset 3 processed (event 5) before offset 1", func(r *PoisonRun) { r.Events[3].Seq = 11 }},
		// Key b's record at 5 processed before its resumed poison record at 4.
		{"past a resumed record", "strict-order: S/0 key b: offset 5", func(r *PoisonRun) { r.Events[6].Seq, r.Events[7].Seq = 8, 7 }},
		// A key never paused, out of its order.
		{"never paused key", "strict-order: S/0 key a: offset 3", func(r *PoisonRun) { r.Events[0].Seq = 12 }},
	} {
		r := goodPoisonRun()
		c.mutate(&r)
		got, _ := CheckPoison(r)
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %v, want one %q", c.name, got, c.want)
		}
	}
	// The relaxed topic has no order: its records in any order pass.
	r := goodPoisonRun()
	r.Acked = append(r.Acked, PoisonRecord{Topic: "R", Partition: 1, Offset: 2, Key: "a", ID: "r2", Kind: PoisonOK})
	r.Events = append(r.Events, PoisonEvent{Seq: 0, Kind: EventProcessed, Topic: "R", Partition: 1, Offset: 2, Key: "a", ID: "r2"})
	if got, _ := CheckPoison(r); len(got) != 0 {
		t.Fatalf("relaxed out of order: %v", got)
	}
}
