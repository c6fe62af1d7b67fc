package checker

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-mq/sluice/chaos/history"
)

// genHistory simulates a correct run with a seeded generator, for the
// benchmark and for planting bugs in a realistic history: three producers
// over six partitions (a few sends failing or of unknown outcome, leader
// changes that leave a control-batch gap), a group of two members that poll
// and commit after each poll and rebalance now and then, a reader, faults,
// then the drain, three agreeing replica logs per partition, a tiered
// re-read of partition 0 and the final watermarks. It stops producing once
// about target events are recorded.
func genHistory(seed uint64, target int) []history.Event {
	const parts = 6
	rng := rand.New(rand.NewPCG(seed, 1))
	type partition struct {
		log   []history.Record
		next  history.Offset
		epoch history.Epoch
	}
	ps := make([]partition, parts)
	for p := range ps {
		ps[p].epoch = 1
	}
	var evs []history.Event
	var now history.Nanos
	tick := func() history.Nanos { now += 1000; return now }
	emit := func(e history.Event) { evs = append(evs, e) }

	// The group's position per partition is an index into the log; members
	// commit after every poll, so it is also the committed position.
	groupPos := make([]int, parts)
	readerPos := make([]int, parts)
	gen := history.Generation(1)
	owner := func(p int) int { return (p + int(gen)) % 2 } // member index
	members := []string{"m0", "m1"}
	memberParts := func(m int) []history.Partition {
		var out []history.Partition
		for p := range parts {
			if owner(p) == m {
				out = append(out, history.Partition(p))
			}
		}
		return out
	}
	for m := range members {
		emit(history.Assign{Rebalance: history.Rebalance{Process: history.Process(10 + m), Group: "g", Member: members[m], Generation: gen, Partitions: memberParts(m), At: tick()}})
	}
	for p := range parts {
		emit(history.Seek{Process: 20, Partition: history.Partition(p), Offset: 0, At: tick()})
	}
	read := func(log []history.Record, pos *int, n int) []history.Record {
		end := min(*pos+n, len(log))
		out := log[*pos:end]
		*pos = end
		return out
	}

	for step := 0; len(evs) < target-200; step++ { // the drain and the logs add about 150
		proc := history.Process(1 + step%3)
		p := rng.IntN(parts)
		pt := &ps[p]
		s := history.Send{Process: proc, Key: fmt.Sprintf("k%d", p), Value: fmt.Sprintf("v%07d", step), Partition: history.Partition(p),
			Offset: history.NoOffset, LeaderEpoch: history.NoEpoch, Invoke: tick()}
		appended := false
		switch x := rng.IntN(100); {
		case x < 2:
			s.Outcome, s.Error = history.Fail, "NOT_ENOUGH_REPLICAS"
		case x < 4:
			s.Outcome, s.Error = history.Info, "request timed out"
			appended = rng.IntN(2) == 0
		default:
			s.Outcome = history.OK
			appended = true
		}
		if appended {
			if rng.IntN(500) == 0 { // a new leader: its control batch takes an offset
				pt.epoch++
				pt.next++
			}
			pt.log = append(pt.log, history.Record{Offset: pt.next, Key: s.Key, Value: s.Value, LeaderEpoch: pt.epoch})
			if s.Outcome == history.OK {
				s.Offset, s.LeaderEpoch = pt.next, pt.epoch
			}
			pt.next++
		}
		s.Complete = tick()
		emit(s)

		if step%8 == 7 {
			for m := range members {
				for _, part := range memberParts(m) {
					recs := read(ps[part].log, &groupPos[part], 20)
					if len(recs) == 0 {
						continue
					}
					t := tick()
					emit(history.Poll{Process: history.Process(10 + m), Consumer: history.ConsumerGroup, Group: "g", Member: members[m], Generation: gen,
						Partition: part, Records: append([]history.Record(nil), recs...), Invoke: t, Complete: tick()})
					t = tick()
					emit(history.Commit{Process: history.Process(10 + m), Group: "g", Member: members[m], Generation: gen, Partition: part,
						Offset: recs[len(recs)-1].Offset + 1, Outcome: history.OK, Invoke: t, Complete: tick()})
				}
			}
		}
		if step%16 == 15 {
			part := rng.IntN(parts)
			if recs := read(ps[part].log, &readerPos[part], 50); len(recs) > 0 {
				t := tick()
				emit(history.Poll{Process: 20, Consumer: history.ConsumerReader, Generation: history.NoGeneration,
					Partition: history.Partition(part), Records: append([]history.Record(nil), recs...), Invoke: t, Complete: tick()})
			}
		}
		if step%3000 == 2999 {
			for m := range members {
				emit(history.Revoke{Rebalance: history.Rebalance{Process: history.Process(10 + m), Group: "g", Member: members[m], Generation: gen, Partitions: memberParts(m), At: tick()}})
			}
			gen++
			for m := range members {
				emit(history.Assign{Rebalance: history.Rebalance{Process: history.Process(10 + m), Group: "g", Member: members[m], Generation: gen, Partitions: memberParts(m), At: tick()}})
			}
		}
		if step%5000 == 0 {
			f := history.Fault{ID: step, Name: "kill", Target: fmt.Sprintf("broker-%d", 1+rng.IntN(3)), At: tick()}
			emit(history.FaultStart{Fault: f})
			f.At = tick()
			emit(history.FaultStop{Fault: f})
		}
	}

	for p := range parts {
		part := history.Partition(p)
		emit(history.Seek{Process: 99, Partition: part, Offset: 0, At: tick()})
		pos := 0
		for pos < len(ps[p].log) {
			recs := read(ps[p].log, &pos, 500)
			t := tick()
			emit(history.Poll{Process: 99, Consumer: history.ConsumerDrain, Generation: history.NoGeneration,
				Partition: part, Records: append([]history.Record(nil), recs...), Invoke: t, Complete: tick()})
		}
		entries := make([]history.ReplicaEntry, len(ps[p].log))
		for i, r := range ps[p].log {
			entries[i] = history.ReplicaEntry{Offset: r.Offset, Digest: history.Digest([]byte(r.Key), []byte(r.Value)), Epoch: r.LeaderEpoch}
		}
		for b := history.BrokerID(1); b <= 3; b++ {
			emit(history.ReplicaLog{Partition: part, Broker: b, LogStart: 0, HighWatermark: ps[p].next, Entries: entries})
		}
		if p == 0 {
			half := len(ps[p].log) / 2
			t := tick()
			emit(history.TieredRead{Process: 98, Partition: part, From: 0, To: ps[p].log[half].Offset,
				Records: append([]history.Record(nil), ps[p].log[:half]...), Invoke: t, Complete: tick()})
		}
		emit(history.Final{Partition: part, LogStart: 0, HighWatermark: ps[p].next, At: tick()})
	}
	return evs
}

func TestGeneratedHistory(t *testing.T) {
	h := genHistory(1, 20_000)
	for _, e := range h {
		if err := e.Validate(); err != nil {
			t.Fatalf("the generator wrote an invalid event: %v", err)
		}
	}
	rep := Check(h)
	if !rep.OK() {
		t.Fatalf("a generated clean history is not clean:\n%s", rep)
	}
	if rep.Stats.Acked < 5000 || rep.Stats.Failed == 0 || rep.Stats.Unknown == 0 || rep.Stats.Commits == 0 {
		t.Fatalf("the generator is too thin: %+v", rep.Stats)
	}

	t.Run("a record dropped from the drain", func(t *testing.T) {
		h := append([]history.Event(nil), h...)
		for i, e := range h {
			p, ok := e.(history.Poll)
			if !ok || p.Consumer != history.ConsumerDrain || p.Partition != 1 || len(p.Records) < 100 {
				continue
			}
			p.Records = append(append([]history.Record(nil), p.Records[:50]...), p.Records[51:]...)
			h[i] = p
			break
		}
		rep := Check(h)
		if rep.Counts[LostWrite] != 1 || rep.Total() != 1 {
			t.Fatalf("want exactly one lost-write:\n%s", rep)
		}
	})
	t.Run("a replica with one record changed", func(t *testing.T) {
		h := append([]history.Event(nil), h...)
		for i, e := range h {
			rl, ok := e.(history.ReplicaLog)
			if !ok || rl.Broker != 2 || len(rl.Entries) < 10 {
				continue
			}
			rl.Entries = append([]history.ReplicaEntry(nil), rl.Entries...)
			rl.Entries[7].Digest = "0000000000000000"
			h[i] = rl
			break
		}
		rep := Check(h)
		if rep.Counts[ReplicaDivergence] != 1 || rep.Total() != 1 {
			t.Fatalf("want exactly one replica-divergence:\n%s", rep)
		}
	})
}

// BenchmarkCheck checks a generated clean history of 100k events.
func BenchmarkCheck(b *testing.B) {
	h := genHistory(1, 100_000)
	records := 0
	for _, e := range h {
		if p, ok := e.(history.Poll); ok {
			records += len(p.Records)
		}
	}
	for b.Loop() {
		if rep := Check(h); !rep.OK() {
			b.Fatalf("not clean:\n%s", rep)
		}
	}
	b.ReportMetric(float64(len(h)), "events")
	b.ReportMetric(float64(records), "records-polled")
}
