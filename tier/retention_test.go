package tier

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal"
)

var t0 = time.UnixMilli(1_800_000_000_000)

// segs makes n sealed segments of 10 offsets and 100 bytes, the i-th with max
// timestamp t0 - (n-i) hours, plus an empty active segment.
func segs(n int) []wal.SegmentInfo {
	var out []wal.SegmentInfo
	for i := range n {
		out = append(out, wal.SegmentInfo{Base: wal.Offset(10 * i), Next: wal.Offset(10*i + 10), Size: 100,
			MaxTimestamp: t0.Add(-time.Duration(n-i) * time.Hour).UnixMilli(), Sealed: true})
	}
	return append(out, wal.SegmentInfo{Base: wal.Offset(10 * n), Next: wal.Offset(10 * n), MaxTimestamp: -1})
}

func TestLocalDeleteBelow(t *testing.T) {
	hour := time.Hour.Milliseconds()
	plain := Policy{RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: -2, LocalRetentionBytes: -2}
	tiered := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: hour / 2, LocalRetentionBytes: Unlimited}
	with := func(p Policy, f func(*Policy)) Policy { f(&p); return p }
	cases := []struct {
		name string
		p    Policy
		in   LocalInput
		want wal.Offset
	}{
		{"unlimited keeps all", plain, LocalInput{Segments: segs(6), HW: 60}, 0},
		{"age", with(plain, func(p *Policy) { p.RetentionMs = 3*hour + 1 }), LocalInput{Segments: segs(6), HW: 60}, 30},
		{"bytes", with(plain, func(p *Policy) { p.RetentionBytes = 250 }), LocalInput{Segments: segs(6), HW: 60}, 40},
		{"bytes exactly at the limit", with(plain, func(p *Policy) { p.RetentionBytes = 600 }), LocalInput{Segments: segs(6), HW: 60}, 0},
		{"zero keeps only the active", with(plain, func(p *Policy) { p.RetentionBytes = 0 }), LocalInput{Segments: segs(6), HW: 60}, 60},
		{"never above the HW", with(plain, func(p *Policy) { p.RetentionMs = 0 }), LocalInput{Segments: segs(6), HW: 25}, 20},
		{"never past a pin", with(plain, func(p *Policy) { p.RetentionMs = 0 }), LocalInput{Segments: segs(6), HW: 60, Pins: []wal.Offset{35}}, 30},
		{"below the log start goes", plain, LocalInput{Segments: segs(6), HW: 60, LogStart: 20}, 20},
		{"tiered: nothing uploaded, nothing goes", with(tiered, func(p *Policy) { p.LocalRetentionMs = 0 }), LocalInput{Segments: segs(6), HW: 60}, 0},
		{"tiered: past total retention goes unuploaded", with(tiered, func(p *Policy) { p.RetentionMs = 3*hour + 1 }), LocalInput{Segments: segs(6), HW: 60}, 30},
		{"tiered: total bytes", with(tiered, func(p *Policy) { p.RetentionBytes = 250 }), LocalInput{Segments: segs(6), HW: 60, RemoteEnd: 10}, 40},
		{"tiered: uploaded and old goes", tiered, LocalInput{Segments: segs(6), HW: 60, RemoteEnd: 45}, 40},
		{"tiered: uploaded but young stays", with(tiered, func(p *Policy) { p.LocalRetentionMs = 24 * hour }), LocalInput{Segments: segs(6), HW: 60, RemoteEnd: 60}, 0},
		{"tiered: local bytes", with(tiered, func(p *Policy) { p.LocalRetentionMs, p.LocalRetentionBytes = Unlimited, 200 }), LocalInput{Segments: segs(6), HW: 60, RemoteEnd: 60}, 40},
		{"tiered: -2 follows the total", with(tiered, func(p *Policy) { p.LocalRetentionMs, p.RetentionMs = -2, 2*hour+1 }), LocalInput{Segments: segs(6), HW: 60, RemoteEnd: 60}, 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			if got := LocalDeleteBelow(tc.p, tc.in); got != tc.want {
				t.Fatalf("LocalDeleteBelow = %d, want %d", got, tc.want)
			}
		})
	}
}

func objs(n int, perHour time.Duration) []RemoteObject {
	var out []RemoteObject
	for i := range n {
		out = append(out, RemoteObject{Key: fmt.Sprint("o", i), Base: wal.Offset(100 * i), Next: wal.Offset(100*i + 100), Size: 1000,
			MaxTs: t0.Add(-time.Duration(n-i) * perHour).UnixMilli()})
	}
	return out
}

func TestRemoteLogStart(t *testing.T) {
	day := (24 * time.Hour).Milliseconds()
	cases := []struct {
		name string
		p    Policy
		in   StartInput
		want wal.Offset
	}{
		{"unlimited", Policy{RetentionMs: Unlimited, RetentionBytes: Unlimited}, StartInput{Objects: objs(5, 24*time.Hour), RemoteEnd: 500}, 0},
		{"older than 3 days", Policy{RetentionMs: 3*day + 1, RetentionBytes: Unlimited}, StartInput{Objects: objs(5, 24*time.Hour), RemoteEnd: 500}, 200},
		{"bytes with local above", Policy{RetentionMs: Unlimited, RetentionBytes: 3500}, StartInput{Objects: objs(5, time.Hour), RemoteEnd: 500, LocalBytesAbove: 1000}, 300},
		{"stays where DeleteRecords put it", Policy{RetentionMs: Unlimited, RetentionBytes: Unlimited}, StartInput{Objects: objs(5, time.Hour), LogStart: 150, RemoteEnd: 500}, 150},
		{"never past the remote end", Policy{RetentionMs: 0, RetentionBytes: Unlimited}, StartInput{Objects: objs(5, time.Hour), RemoteEnd: 450}, 450},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			if got := RemoteLogStart(tc.p, tc.in); got != tc.want {
				t.Fatalf("RemoteLogStart = %d, want %d", got, tc.want)
			}
		})
	}
}

// Thirty days of retention driven by a clock: each day one object is
// uploaded; the log start follows retention.ms, objects go only after the
// grace period, oldest first, never one a reader is in, and the clean offset
// trails the log start.
func TestThirtyDaysOfRetention(t *testing.T) {
	p := Policy{Tiered: true, RetentionMs: (30 * 24 * time.Hour).Milliseconds(), RetentionBytes: Unlimited, Grace: time.Hour}
	var all []RemoteObject
	st := CleanState{}
	deleted := map[string]bool{}
	var order []string
	now := t0
	reader := wal.Offset(-1) // a reader streaming from this offset, or -1
	for day := range 90 {
		all = append(all, RemoteObject{Key: fmt.Sprint("day", day), Base: wal.Offset(day * 100), Next: wal.Offset(day*100 + 100), Size: 1 << 20, MaxTs: now.UnixMilli()})
		if day == 40 {
			reader = 1050 // inside day 10's object, which expires at day 40
		}
		if day == 45 {
			reader = -1
		}
		for step := 0; step < 48; step++ { // every half hour
			now = now.Add(30 * time.Minute)
			var live []RemoteObject
			for _, o := range all {
				if o.Next > st.LogStart {
					live = append(live, o)
				}
			}
			newStart := RemoteLogStart(p, StartInput{Objects: live, LogStart: st.LogStart, RemoteEnd: all[len(all)-1].Next, Now: now})
			if newStart < st.LogStart {
				t.Fatalf("day %d: log start went back from %d to %d", day, st.LogStart, newStart)
			}
			st.LogStart = newStart
			var pins []wal.Offset
			if reader >= 0 {
				pins = append(pins, reader)
			}
			stepc, ok := NextClean(p, st, all, pins, now)
			if !ok {
				continue
			}
			if stepc.SetPending {
				st.Pending, st.DueMs = stepc.Pending, stepc.DueMs
				continue
			}
			for _, o := range stepc.Delete {
				if o.Next > st.LogStart {
					t.Fatalf("day %d: deleting %s [%d, %d) above the log start %d", day, o.Key, o.Base, o.Next, st.LogStart)
				}
				if reader >= 0 && o.Next > reader {
					t.Fatalf("day %d: deleting %s which holds the reader at %d", day, o.Key, reader)
				}
				if deleted[o.Key] {
					t.Fatalf("day %d: %s deleted twice", day, o.Key)
				}
				if expiry := time.UnixMilli(o.MaxTs).Add(30 * 24 * time.Hour).Add(p.Grace); now.Before(expiry) {
					t.Fatalf("day %d: %s deleted at %v, before retention and grace end at %v", day, o.Key, now, expiry)
				}
				deleted[o.Key] = true
				order = append(order, o.Key)
			}
			if stepc.CleanTo < st.Clean {
				t.Fatalf("clean went back")
			}
			st.Clean = stepc.CleanTo
			if st.Clean >= st.Pending {
				st.Pending, st.DueMs = 0, 0
			}
		}
	}
	// After 90 days, the objects of days 0..58 have expired (day 59's
	// expires during the last day's final half hours only if its grace ran).
	for i, k := range order {
		if k != fmt.Sprint("day", i) {
			t.Fatalf("deletion %d was %s: not oldest first (%v)", i, k, order)
		}
	}
	if len(order) < 58 || len(order) > 60 {
		t.Fatalf("%d objects deleted after 90 days of 30-day retention, want about 59", len(order))
	}
	for _, o := range all[len(order):] {
		if deleted[o.Key] {
			t.Fatalf("%s deleted out of order", o.Key)
		}
	}
}

// The clean-up step, one decision at a time. The grace period is what keeps
// a reader already streaming an object below a moved log start from losing
// it: while a pending target's grace runs, nothing is deleted.
func TestNextClean(t *testing.T) {
	p := Policy{Tiered: true, Grace: time.Hour}
	all := objs(5, time.Hour) // [0,100) ... [400,500)
	due := t0.Add(time.Hour).UnixMilli()
	cases := []struct {
		name string
		st   CleanState
		pins []wal.Offset
		now  time.Time
		want CleanStep
		ok   bool
	}{
		{"nothing below the log start", CleanState{Clean: 200, LogStart: 200}, nil, t0, CleanStep{}, false},
		{"the log start moved: a grace period starts", CleanState{Clean: 100, LogStart: 350}, nil, t0,
			CleanStep{SetPending: true, Pending: 350, DueMs: due}, true},
		{"within the grace: nothing", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 350}, nil, t0, CleanStep{}, false},
		{"a millisecond before the grace ends: nothing", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 350}, nil, time.UnixMilli(due - 1), CleanStep{}, false},
		{"within the grace, the log start moved on: nothing", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 500}, nil, t0.Add(time.Minute), CleanStep{}, false},
		{"the grace has run: whole objects below the target go", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 350}, nil, time.UnixMilli(due),
			CleanStep{Delete: all[1:3], CleanTo: 350}, true},
		{"the grace has run, a pin caps the target", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 350}, []wal.Offset{250}, time.UnixMilli(due),
			CleanStep{Delete: all[1:2], CleanTo: 250}, true},
		{"the grace has run, a pin at the clean offset: nothing", CleanState{Clean: 100, Pending: 350, DueMs: due, LogStart: 350}, []wal.Offset{100}, time.UnixMilli(due), CleanStep{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NextClean(p, tc.st, all, tc.pins, tc.now)
			if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("NextClean = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
