package tier

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// refModel is one partition's ledger entry of one object and the truth it
// stands for: the records naming the object, appended or still on their
// way, as the fold never sees them.
type refModel struct {
	entry    *meta.LargeRef
	logStart int64
	logEnd   int64
	appended []int64 // offsets of appended records naming the object
	inFlight []int64 // append times (ms) of claimed records not appended yet
}

// claim records a claim at now, as meta.ClaimRef does.
func (m *refModel) claim(now int64) {
	if m.entry == nil {
		m.entry = &meta.LargeRef{Ref: "obj", ClaimedMs: now, Open: true}
		return
	}
	m.entry.Open, m.entry.ClaimedMs = true, max(m.entry.ClaimedMs, now)
}

func (m *refModel) fold(now time.Time, settle time.Duration) {
	if m.entry == nil {
		return
	}
	for _, a := range FoldPartitionRefs([]meta.LargeRef{*m.entry}, m.logStart, m.logEnd, now, settle) {
		switch {
		case a.Close:
			m.entry.Open, m.entry.Upto = false, max(m.entry.Upto, a.Upto)
		case a.Drop:
			m.entry = nil
		}
	}
}

// TestFoldNeverDropsALiveReference: over random histories of claims,
// appends within the settle time (or never), other records, retention
// moving the log start and folds at random times, the entry is never gone
// while an appended record naming the object is at or above the log start,
// nor while a claimed record is still on its way; and once every record is
// below the log start and the claims settled, two folds drop it.
func TestFoldNeverDropsALiveReference(t *testing.T) {
	const settle = 15 * time.Minute
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 21))
		m := &refModel{}
		now := int64(1_800_000_000_000)
		for step := range 400 {
			now += rng.Int64N(int64(3 * time.Minute / time.Millisecond))
			// Claimed records whose time came are appended.
			var still []int64
			for _, at := range m.inFlight {
				if at <= now {
					m.appended = append(m.appended, m.logEnd)
					m.logEnd++
				} else {
					still = append(still, at)
				}
			}
			m.inFlight = still
			switch rng.IntN(6) {
			case 0: // a produce of an envelope: claim, then append (or fail) within the settle time
				m.claim(now)
				if rng.IntN(5) > 0 {
					m.inFlight = append(m.inFlight, now+rng.Int64N(settle.Milliseconds()))
				}
			case 1, 2: // other records
				m.logEnd += rng.Int64N(20)
			case 3: // retention or DeleteRecords moves the log start
				m.logStart += rng.Int64N(m.logEnd - m.logStart + 1)
			default:
				m.fold(time.UnixMilli(now), settle)
			}
			if m.entry == nil {
				for _, o := range m.appended {
					if o >= m.logStart {
						t.Fatalf("seed %d step %d: entry dropped with record %d at or above log start %d", seed, step, o, m.logStart)
					}
				}
				if len(m.inFlight) > 0 {
					t.Fatalf("seed %d step %d: entry dropped with %d records on their way", seed, step, len(m.inFlight))
				}
			}
			if e := m.entry; e != nil && !e.Open {
				for _, o := range m.appended {
					if o >= e.Upto {
						t.Fatalf("seed %d step %d: closed bound %d below record %d", seed, step, e.Upto, o)
					}
				}
			}
		}
		// The end: everything lands, retention passes it all, claims settle.
		for range m.inFlight {
			m.appended = append(m.appended, m.logEnd)
			m.logEnd++
		}
		m.inFlight = nil
		now += settle.Milliseconds()
		m.logStart = m.logEnd
		m.fold(time.UnixMilli(now), settle)
		m.fold(time.UnixMilli(now), settle)
		if m.entry != nil {
			t.Fatalf("seed %d: entry %+v kept with every record below the log start %d", seed, *m.entry, m.logStart)
		}
	}
}

// TestFoldPartitionRefsCases: the rules one by one.
func TestFoldPartitionRefsCases(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	settle := time.Minute
	young := meta.LargeRef{Ref: "young", Open: true, ClaimedMs: now.UnixMilli() - 59_999, Upto: 3}
	settled := meta.LargeRef{Ref: "settled", Open: true, ClaimedMs: now.UnixMilli() - 60_000, Upto: 3}
	settledHigh := meta.LargeRef{Ref: "high", Open: true, ClaimedMs: 0, Upto: 900}
	live := meta.LargeRef{Ref: "live", Upto: 101}
	dead := meta.LargeRef{Ref: "dead", Upto: 100}
	got := FoldPartitionRefs([]meta.LargeRef{young, settled, settledHigh, live, dead}, 100, 500, now, settle)
	want := []string{"settled close 500", "high close 900", "dead drop"}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, a := range got {
		s := fmt.Sprintf("%s drop", a.Ref.Ref)
		if a.Close {
			s = fmt.Sprintf("%s close %d", a.Ref.Ref, a.Upto)
		}
		if s != want[i] {
			t.Errorf("action %d: %s, want %s", i, s, want[i])
		}
	}
}

// TestPlanRelease: an object is kept while any entry of a live topic is
// left or it never went through the ledger; condemned when none is left;
// deleted only at the due time.
func TestPlanRelease(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	grace := time.Hour
	cases := []struct {
		name   string
		ledger bool
		live   int
		due    int64
		want   ReleaseStep
		wantDu int64
	}{
		{"no ledger", false, 0, 0, ReleaseKeep, 0},
		{"referenced", true, 2, 0, ReleaseKeep, 0},
		{"unreferenced", true, 0, 0, ReleaseCondemn, now.Add(grace).UnixMilli()},
		{"grace running", true, 0, now.UnixMilli() + 1, ReleaseKeep, now.UnixMilli() + 1},
		{"grace over", true, 0, now.UnixMilli(), ReleaseDelete, now.UnixMilli()},
		{"referenced while condemned", true, 1, now.UnixMilli(), ReleaseKeep, now.UnixMilli()},
	}
	for _, c := range cases {
		got, due := PlanRelease(c.ledger, c.live, c.due, now, grace)
		if got != c.want || due != c.wantDu {
			t.Errorf("%s: %v %d, want %v %d", c.name, got, due, c.want, c.wantDu)
		}
	}
}
