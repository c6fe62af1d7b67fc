package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/chaos/history"
)

// clean is a small history of a correct run touching every event kind: a
// producer, a group member that commits and hands over, a reader, faults,
// three agreeing replicas, a tiered re-read, the drain and the final HW.
func clean() *hist {
	b := newHist().
		add(history.FaultStart{Fault: history.Fault{ID: 1, Name: "kill", Target: "broker-2", At: 1}}).
		ack(1, 0, 0, "a").ack(1, 0, 1, "b").
		assign(2, "m1", 1, 0).
		gpoll(2, "m1", 1, 0, r(0, "a"), r(1, "b")).
		commit(2, "m1", 1, 0, 2).
		ackEpoch(1, 0, 3, "c", 2). // offset 2 holds the new leader's control batch
		add(history.FaultStop{Fault: history.Fault{ID: 1, Name: "kill", Target: "broker-2", At: 200}}).
		gpoll(2, "m1", 1, 0, reEpoch(3, "c", 2)).
		commit(2, "m1", 1, 0, 4).
		revoke(2, "m1", 1, 0).
		assign(3, "m2", 2, 0).
		ackEpoch(1, 0, 4, "d", 2).
		gpoll(3, "m2", 2, 0, reEpoch(4, "d", 2)).
		commit(3, "m2", 2, 0, 5).
		seek(4, 0, 0).
		read(4, 0, r(0, "a"), r(1, "b")).
		read(4, 0, reEpoch(3, "c", 2), reEpoch(4, "d", 2)).
		sendFail(1, 0, "x").
		sendInfo(1, 0, "y")
	log := []rec{r(0, "a"), r(1, "b"), reEpoch(3, "c", 2), reEpoch(4, "d", 2)}
	for broker := history.BrokerID(1); broker <= 3; broker++ {
		b.replica(0, broker, 0, 5, log...)
	}
	return b.tiered(0, 0, 4, log[:3]...).
		seek(99, 0, 0).
		drain(0, log...).
		final(0, 0, 5)
}

func reEpoch(o history.Offset, v string, e history.Epoch) rec { return re(o, v, e) }

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		h    *hist
		want map[Kind]int // kinds not listed must be zero
	}{
		{"clean history", clean(), nil},
		{"empty history", newHist(), nil},

		// Unknown outcomes may or may not have happened.
		{"unknown-outcome send that appears", newHist().ack(1, 0, 0, "a").sendInfo(1, 0, "b").
			read(2, 0, r(0, "a"), r(1, "b")).drain(0, r(0, "a"), r(1, "b")).final(0, 0, 2), nil},
		{"unknown-outcome send that never appears", newHist().ack(1, 0, 0, "a").sendInfo(1, 0, "b").
			drain(0, r(0, "a")).final(0, 0, 1), nil},
		{"definitely failed send that never appears", newHist().ack(1, 0, 0, "a").sendFail(1, 0, "b").
			drain(0, r(0, "a")).final(0, 0, 1), nil},

		{"lost-write: acknowledged above the final HW", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").
			drain(0, r(0, "a")).final(0, 0, 1), map[Kind]int{LostWrite: 1}},
		{"lost-write: present at another offset", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").
			drain(0, r(0, "a"), r(2, "b")).final(0, 0, 3), map[Kind]int{LostWrite: 1}},
		{"lost-write: overwritten in the final log", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").sendInfo(2, 0, "c").
			drain(0, r(0, "a"), r(1, "c")).final(0, 0, 2), map[Kind]int{LostWrite: 1}},
		{"lost-write: a read value the final log lost", newHist().ack(1, 0, 0, "a").sendInfo(1, 0, "b").ack(1, 0, 2, "c").
			read(2, 0, r(0, "a"), r(1, "b"), r(2, "c")).drain(0, r(0, "a"), r(2, "c")).final(0, 0, 3),
			map[Kind]int{LostWrite: 1}},
		{"below the final log start: not judged", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").
			drain(0, r(1, "b")).final(0, 1, 2), nil},

		{"unseen: the drain stopped short", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").
			drain(0, r(0, "a")).final(0, 0, 2), map[Kind]int{Unseen: 1}},
		{"not unseen: a consumer saw it beyond the drain", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").
			read(2, 0, r(0, "a"), r(1, "b")).drain(0, r(0, "a")).final(0, 0, 2), nil},

		{"duplicate", newHist().ack(1, 0, 0, "a").
			drain(0, r(0, "a"), r(1, "a")).final(0, 0, 2), map[Kind]int{Duplicate: 1}},

		{"inconsistent-offsets", newHist().ack(1, 0, 0, "a").sendInfo(1, 0, "b").
			read(2, 0, r(0, "b")).drain(0, r(0, "a")).final(0, 0, 1), map[Kind]int{InconsistentOffsets: 1}},

		{"nonmonotonic-send", newHist().ack(1, 0, 1, "a").ack(1, 0, 0, "b").
			drain(0, r(0, "b"), r(1, "a")).final(0, 0, 2), map[Kind]int{NonmonotonicSend: 1}},
		{"not nonmonotonic-send: two producers interleave", newHist().ack(1, 0, 1, "a").ack(2, 0, 0, "b").
			drain(0, r(0, "b"), r(1, "a")).final(0, 0, 2), nil},

		{"poll-skip: reader between polls", acked3().seek(2, 0, 0).read(2, 0, r(0, "a")).read(2, 0, r(2, "c")).drained3(),
			map[Kind]int{PollSkip: 1}},
		{"poll-skip: inside one poll", acked3().seek(2, 0, 0).read(2, 0, r(0, "a"), r(2, "c")).drained3(),
			map[Kind]int{PollSkip: 1}},
		{"poll-skip: after a seek", acked3().seek(2, 0, 0).read(2, 0, r(1, "b"), r(2, "c")).drained3(),
			map[Kind]int{PollSkip: 1}},
		{"poll-skip: group member within a generation", acked3().assign(2, "m1", 1, 0).
			gpoll(2, "m1", 1, 0, r(0, "a")).gpoll(2, "m1", 1, 0, r(2, "c")).drained3(),
			map[Kind]int{PollSkip: 1}},
		{"not poll-skip: a rebalance in between", acked3().assign(2, "m1", 1, 0).
			gpoll(2, "m1", 1, 0, r(0, "a")).revoke(2, "m1", 1, 0).assign(2, "m1", 2, 0).
			commit(2, "m1", 2, 0, 2).gpoll(2, "m1", 2, 0, r(2, "c")).drained3(), nil},
		{"not poll-skip: the gap holds no record", newHist().ack(1, 0, 0, "a").ack(1, 0, 2, "c").
			seek(2, 0, 0).read(2, 0, r(0, "a")).read(2, 0, r(2, "c")).
			drain(0, r(0, "a"), r(2, "c")).final(0, 0, 3), nil},

		{"nonmonotonic-poll: between polls", acked3().seek(2, 0, 0).
			read(2, 0, r(0, "a"), r(1, "b")).read(2, 0, r(1, "b"), r(2, "c")).drained3(),
			map[Kind]int{NonmonotonicPoll: 1}},
		{"nonmonotonic-poll: inside one poll", acked3().seek(2, 0, 0).
			read(2, 0, r(0, "a"), r(1, "b"), r(0, "a"), r(1, "b"), r(2, "c")).drained3(),
			map[Kind]int{NonmonotonicPoll: 1}},
		{"nonmonotonic-poll: below the seek", acked3().seek(2, 0, 1).read(2, 0, r(0, "a"), r(1, "b")).drained3(),
			map[Kind]int{NonmonotonicPoll: 1}},
		{"not nonmonotonic-poll: a seek back in between", acked3().seek(2, 0, 0).
			read(2, 0, r(0, "a"), r(1, "b")).seek(2, 0, 0).read(2, 0, r(0, "a")).drained3(), nil},
		{"not nonmonotonic-poll: a new generation re-reads", acked3().assign(2, "m1", 1, 0).
			gpoll(2, "m1", 1, 0, r(0, "a"), r(1, "b")).gpoll(2, "m1", 2, 0, r(0, "a")).drained3(), nil},

		{"aborted-read", newHist().ack(1, 0, 0, "a").sendFail(1, 0, "b").
			drain(0, r(0, "a"), r(1, "b")).final(0, 0, 2), map[Kind]int{AbortedRead: 1}},
		{"unexpected-read: never sent", newHist().ack(1, 0, 0, "a").
			drain(0, r(0, "a"), r(1, "z")).final(0, 0, 2), map[Kind]int{UnexpectedRead: 1}},
		{"unexpected-read: sent to another partition", newHist().ack(1, 0, 0, "a").sendInfo(1, 1, "b").
			drain(0, r(0, "a"), r(1, "b")).final(0, 0, 2).final(1, 0, 0), map[Kind]int{UnexpectedRead: 1}},

		{"replica-divergence: different records", newHist().
			replica(0, 1, 0, 2, r(0, "a"), r(1, "b")).
			replica(0, 2, 0, 2, r(0, "a"), r(1, "b")).
			replica(0, 3, 0, 2, r(0, "a"), r(1, "x")), map[Kind]int{ReplicaDivergence: 1}},
		{"replica-divergence: a record missing below the HW", newHist().
			replica(0, 1, 0, 2, r(0, "a"), r(1, "b")).
			replica(0, 2, 0, 2, r(0, "a")), map[Kind]int{ReplicaDivergence: 1}},
		{"replica-divergence: same record, other epoch", newHist().
			replica(0, 1, 0, 1, re(0, "a", 1)).
			replica(0, 2, 0, 1, re(0, "a", 2)), map[Kind]int{ReplicaDivergence: 1}},
		{"not replica-divergence: a lagging follower and a shorter local log", newHist().
			replica(0, 1, 0, 3, r(0, "a"), r(1, "b"), r(2, "c")).
			replica(0, 2, 0, 1, r(0, "a")).
			replica(0, 3, 2, 3, r(2, "c")), nil},
		{"not replica-divergence: a log split over two events", newHist().
			replica(0, 1, 0, 2, r(0, "a")).replica(0, 1, 0, 2, r(1, "b")).
			replica(0, 2, 0, 2, r(0, "a"), r(1, "b")), nil},

		{"stale-generation-commit", newHist().assign(1, "m1", 1, 0).assign(2, "m2", 2, 0).
			commit(1, "m1", 1, 0, 0), map[Kind]int{StaleGenerationCommit: 1}},
		{"not stale: the broker rejected it", newHist().assign(1, "m1", 1, 0).assign(2, "m2", 2, 0).
			commitWith(history.Commit{Process: 1, Member: "m1", Generation: 1, Partition: 0, Offset: 0, Outcome: history.Fail, Error: "ILLEGAL_GENERATION"}), nil},

		{"offset-regression", newHist().commit(1, "m1", 1, 0, 5).commit(1, "m1", 1, 0, 3),
			map[Kind]int{OffsetRegression: 1}},
		{"not offset-regression: a reset in between", newHist().commit(1, "m1", 1, 0, 5).
			commitWith(history.Commit{Process: 9, Generation: history.NoGeneration, Partition: 0, Offset: 0, Reset: true, Outcome: history.OK}).
			commit(1, "m1", 1, 0, 3), nil},
		{"not offset-regression: the higher commit failed", newHist().
			commitWith(history.Commit{Process: 1, Member: "m1", Generation: 1, Partition: 0, Offset: 5, Outcome: history.Fail, Error: "COORDINATOR_NOT_AVAILABLE"}).
			commit(1, "m1", 1, 0, 3), nil},
		{"not offset-regression: another partition", newHist().commit(1, "m1", 1, 0, 5).commit(1, "m1", 1, 1, 3), nil},

		{"handover-skip", acked3().assign(1, "m1", 1, 0).gpoll(1, "m1", 1, 0, r(0, "a")).commit(1, "m1", 1, 0, 1).
			revoke(1, "m1", 1, 0).assign(2, "m2", 2, 0).gpoll(2, "m2", 2, 0, r(2, "c")).drained3(),
			map[Kind]int{HandoverSkip: 1}},
		{"not handover-skip: the new owner re-reads", acked3().assign(1, "m1", 1, 0).gpoll(1, "m1", 1, 0, r(0, "a"), r(1, "b")).commit(1, "m1", 1, 0, 1).
			revoke(1, "m1", 1, 0).assign(2, "m2", 2, 0).gpoll(2, "m2", 2, 0, r(1, "b"), r(2, "c")).drained3(), nil},
		{"not handover-skip: a commit of unknown outcome went further", acked3().assign(1, "m1", 1, 0).gpoll(1, "m1", 1, 0, r(0, "a"), r(1, "b")).commit(1, "m1", 1, 0, 1).
			commitWith(history.Commit{Process: 1, Member: "m1", Generation: 1, Partition: 0, Offset: 2, Outcome: history.Info}).
			revoke(1, "m1", 1, 0).assign(2, "m2", 2, 0).gpoll(2, "m2", 2, 0, r(2, "c")).drained3(), nil},

		{"epoch-regression: final log", newHist().ackEpoch(1, 0, 0, "a", 2).ackEpoch(1, 0, 1, "b", 1).
			drain(0, re(0, "a", 2), re(1, "b", 1)).final(0, 0, 2), map[Kind]int{EpochRegression: 1}},
		{"epoch-regression: a replica's log", newHist().replica(0, 1, 0, 2, re(0, "a", 2), re(1, "b", 1)),
			map[Kind]int{EpochRegression: 1}},
		{"not epoch-regression: unknown epochs", newHist().ackEpoch(1, 0, 0, "a", 2).ackEpoch(1, 0, 1, "b", history.NoEpoch).
			drain(0, re(0, "a", 2), re(1, "b", history.NoEpoch)).final(0, 0, 2), nil},

		{"tiered-read-mismatch: other value", acked3().tiered(0, 0, 3, r(0, "a"), r(1, "x"), r(2, "c")).drained3(),
			map[Kind]int{TieredReadMismatch: 1}},
		{"tiered-read-mismatch: a record missing", acked3().tiered(0, 0, 3, r(0, "a"), r(2, "c")).drained3(),
			map[Kind]int{TieredReadMismatch: 1}},
		{"tiered-read-mismatch: above the final HW", acked3().tiered(0, 0, 4, r(0, "a"), r(1, "b"), r(2, "c"), r(3, "u")).drained3(),
			map[Kind]int{TieredReadMismatch: 1}},
		{"not tiered-read-mismatch: a partial range", acked3().tiered(0, 1, 2, r(1, "b")).drained3(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Check(tt.h.evs)
			for _, k := range Kinds() {
				if got := rep.Counts[k]; got != tt.want[k] {
					t.Errorf("%s: %d, want %d", k, got, tt.want[k])
				}
			}
			if len(rep.Unchecked) != 0 {
				t.Errorf("unchecked: %q", rep.Unchecked)
			}
			if rep.OK() != (len(tt.want) == 0) {
				t.Errorf("OK() = %v", rep.OK())
			}
			if t.Failed() {
				t.Logf("report:\n%s", rep)
			}
		})
	}
}

// TestAnomalyDetails checks what one anomaly carries: keys, offsets,
// values and the events involved.
func TestAnomalyDetails(t *testing.T) {
	b := newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").drain(0, r(0, "a"), r(2, "b")).final(0, 0, 3)
	rep := Check(b.evs)
	if len(rep.Anomalies) != 1 {
		t.Fatalf("anomalies: %+v", rep.Anomalies)
	}
	a := rep.Anomalies[0]
	if a.Kind != LostWrite || a.Partition != 0 || fmt.Sprint(a.Offsets) != "[1]" ||
		fmt.Sprint(a.Keys) != "[k]" || fmt.Sprint(a.Values) != "[b]" {
		t.Fatalf("anomaly %+v", a)
	}
	if !strings.Contains(a.Detail, "0/2") {
		t.Errorf("detail %q does not say where the value went", a.Detail)
	}
	var idxs []int
	for _, e := range a.Excerpt {
		idxs = append(idxs, e.Index)
		if _, err := history.UnmarshalEvent(e.Event); err != nil {
			t.Errorf("excerpt %d is not a history line: %v", e.Index, err)
		}
	}
	// The send, the drain poll that holds the value elsewhere, the final.
	if fmt.Sprint(idxs) != "[1 2 3]" {
		t.Errorf("excerpt events %v, want [1 2 3]", idxs)
	}
}

func TestExcerptTrimsLongPolls(t *testing.T) {
	b := newHist().sendInfo(2, 0, "other")
	var log []rec
	for o := range history.Offset(100) {
		v := fmt.Sprintf("v%03d", o)
		b.ack(1, 0, o, v)
		if o == 50 {
			v = "other"
		}
		log = append(log, r(o, v))
	}
	b.drain(0, log...).final(0, 0, 100)
	rep := Check(b.evs)
	if rep.Counts[LostWrite] != 1 || len(rep.Anomalies) != 1 {
		t.Fatalf("report:\n%s", rep)
	}
	polls := 0
	for _, e := range rep.Anomalies[0].Excerpt {
		ev, err := history.UnmarshalEvent(e.Event)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(history.Poll); ok {
			polls++
			if e.Omitted != 100-len(p.Records) || len(p.Records) > trimmedRecords || p.Records[0].Offset < 48 {
				t.Errorf("poll quoted with %d records (%d omitted) from offset %d", len(p.Records), e.Omitted, p.Records[0].Offset)
			}
		}
	}
	if polls != 1 {
		t.Fatalf("the drain poll is not quoted:\n%s", rep)
	}
}

func TestUnchecked(t *testing.T) {
	tests := []struct {
		name string
		h    *hist
		want string
	}{
		{"no final event", newHist().ack(1, 0, 0, "a").ack(1, 3, 0, "b").final(0, 0, 1).drain(0, r(0, "a")), "partition 3 has no final event"},
		{"a value sent twice", newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "a").drain(0, r(0, "a"), r(1, "a")).final(0, 0, 2), `value "a" is sent by events 0 and 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Check(tt.h.evs)
			if rep.OK() || len(rep.Unchecked) == 0 || !strings.Contains(rep.Unchecked[0], tt.want) {
				t.Fatalf("unchecked %q, want one containing %q", rep.Unchecked, tt.want)
			}
			if !strings.Contains(rep.String(), "unchecked: "+rep.Unchecked[0]) {
				t.Errorf("text report does not show it:\n%s", rep)
			}
		})
	}
}

func TestExamplesAreCapped(t *testing.T) {
	b := newHist()
	for o := range history.Offset(MaxExamples + 10) {
		b.ack(1, 0, o, fmt.Sprintf("v%d", o))
	}
	b.final(0, 0, 0)
	rep := Check(b.evs)
	if rep.Counts[LostWrite] != MaxExamples+10 || len(rep.Anomalies) != MaxExamples {
		t.Fatalf("count %d, kept %d", rep.Counts[LostWrite], len(rep.Anomalies))
	}
	if rep.Total() != MaxExamples+10 {
		t.Fatalf("total %d", rep.Total())
	}
}

func TestRenderings(t *testing.T) {
	rep := Check(newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").drain(0, r(0, "a")).final(0, 0, 1).evs)
	text := rep.String()
	for _, k := range Kinds() {
		want := fmt.Sprintf("%s  %d", k, rep.Counts[k])
		if !strings.Contains(text, string(k)) || !strings.Contains(strings.Join(strings.Fields(text), "  "), want) {
			t.Errorf("table has no row %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "FAIL: 1 anomalies") || !strings.Contains(text, `"value":"b"`) {
		t.Errorf("text report:\n%s", text)
	}
	if !strings.Contains(Check(clean().evs).String(), "\nOK\n") {
		t.Error("a clean report does not say OK")
	}

	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Counts) != len(Kinds()) || back.Counts[LostWrite] != 1 || back.OK() {
		t.Fatalf("JSON report: %s", buf.Bytes())
	}
	if string(back.Anomalies[0].Excerpt[0].Event) == "" {
		t.Fatal("excerpt lost in JSON")
	}
}

func TestDeterministic(t *testing.T) {
	h := genHistory(7, 20_000)
	var first bytes.Buffer
	if err := Check(h).WriteJSON(&first); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var again bytes.Buffer
		if err := Check(h).WriteJSON(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), again.Bytes()) {
			t.Fatal("two checks of one history differ")
		}
	}
}
