package canary

// Tests of the outage a canary's restart spans (availability.go): each run
// is a Canary opened on the same store with an injected clock, fed rounds
// as its publisher would; a crash is a store closed without a clean stop,
// which leaves on disk what a kill -9 leaves.

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// testRun is one run of a canary over a store.
type testRun struct {
	t   *testing.T
	c   *Canary
	log *bytes.Buffer
}

// startRun opens a run on dir, its clock reading *now.
func startRun(t *testing.T, dir string, now *time.Time) *testRun {
	t.Helper()
	log := new(bytes.Buffer)
	c := New(Config{Dir: dir, AZ: "a", Interval: 500 * time.Millisecond, SaveEvery: 5 * time.Second,
		Now: func() time.Time { return *now }, Logger: zerolog.New(log), Registerer: prometheus.NewRegistry()})
	if err := c.openStore(); err != nil {
		t.Fatal(err)
	}
	return &testRun{t: t, c: c, log: log}
}

// crash ends the run as kill -9 would: no clean stop.
func (r *testRun) crash() { _ = r.c.sink.Close() }

func (r *testRun) check(step string, avail, outages float64) {
	r.t.Helper()
	if got := testutil.ToFloat64(r.c.m.available); got != avail {
		r.t.Fatalf("%s: sluice_canary_available %v, want %v", step, got, avail)
	}
	if got := testutil.ToFloat64(r.c.m.outages); got != outages {
		r.t.Fatalf("%s: sluice_canary_outages_total %v, want %v", step, got, outages)
	}
}

// lines are the run's log lines, decoded.
func (r *testRun) lines() []map[string]any {
	r.t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			r.t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// messages are the run's log messages, each with its cause when it has
// one ("canary unavailable (cause)").
func (r *testRun) messages() []string {
	var out []string
	for _, m := range r.lines() {
		s, _ := m["message"].(string)
		if c, ok := m["cause"].(string); ok {
			s += " (" + c + ")"
		}
		out = append(out, s)
	}
	return out
}

// outageMs is the outage_ms of the run's last "canary available again".
func (r *testRun) outageMs() time.Duration {
	r.t.Helper()
	ls := r.lines()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i]["message"] == "canary available again" {
			ms, ok := ls[i]["outage_ms"].(float64)
			if !ok {
				r.t.Fatalf("%v has no outage_ms", ls[i])
			}
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	r.t.Fatalf("no \"canary available again\" logged: %q", r.messages())
	return 0
}

func sameMessages(t *testing.T, step string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: logged %q, want %q", step, got, want)
	}
}

// TestCanaryReportsTheOutageOfItsBrokersCrash: a run killed while its
// canary was available leaves its last mark; the next run counts the
// outage at its start (sluice_canary_outages_total 1, "canary
// unavailable" because the broker was not running) and, at its first
// round acknowledged in full, logs "canary available again" with the
// outage measured from that mark: longer than the real gap by less than
// SaveEvery. On the old code every run started with no outage counted.
func TestCanaryReportsTheOutageOfItsBrokersCrash(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	r1 := startRun(t, dir, &now)
	r1.check("first run started", 0, 0)
	var lastGood time.Time
	for range 24 { // 12 s of rounds, every one acknowledged
		now = now.Add(500 * time.Millisecond)
		r1.c.avail.round(true)
		lastGood = now
	}
	r1.check("first run up", 1, 0)
	sameMessages(t, "first run", r1.messages(), []string{"canary available"})
	now = now.Add(300 * time.Millisecond)
	r1.crash()

	now = now.Add(20 * time.Second) // the broker restarts
	r2 := startRun(t, dir, &now)
	r2.check("second run started", 0, 1)
	sameMessages(t, "second run's start", r2.messages(), []string{"canary unavailable (" + causeNotRunning + ")"})
	now = now.Add(500 * time.Millisecond)
	r2.c.avail.round(false) // the cluster is still electing leaders
	r2.check("second run's first round failed", 0, 1)
	now = now.Add(500 * time.Millisecond)
	r2.c.avail.round(true)
	r2.check("second run's first round acknowledged", 1, 1)
	sameMessages(t, "second run", r2.messages(), []string{"canary unavailable (" + causeNotRunning + ")", "canary available again"})
	gap := now.Sub(lastGood)
	if got := r2.outageMs(); got < gap || got >= gap+5*time.Second {
		t.Fatalf("outage_ms %v; the canary was last available %v ago, want that to less than SaveEvery (5s) more", got, gap)
	}
	r2.crash()
}

// TestCanaryCarriesAnOutageAcrossRunsOnce: a run that dies during an
// outage (here: killed again before its first round) leaves it to the next
// run, which does not count it again but logs its end, measured from the
// outage's start two runs back.
func TestCanaryCarriesAnOutageAcrossRunsOnce(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	r1 := startRun(t, dir, &now)
	r1.c.avail.round(true)
	up := now
	r1.crash()

	now = now.Add(10 * time.Second)
	r2 := startRun(t, dir, &now)
	r2.check("second run started", 0, 1)
	r2.crash()

	now = now.Add(10 * time.Second)
	r3 := startRun(t, dir, &now)
	r3.check("third run started", 0, 0) // counted by the second run
	now = now.Add(time.Second)
	r3.c.avail.round(true)
	r3.check("third run up", 1, 0)
	sameMessages(t, "third run", r3.messages(), []string{"canary outage carried over from an earlier run (" + causeNotRunning + ")", "canary available again"})
	if got, want := r3.outageMs(), now.Sub(up); got != want {
		t.Fatalf("outage_ms %v, want %v (from the first run's last mark)", got, want)
	}
	r3.crash()
}

// TestCanaryCleanStopIsNoOutage: a run stopped cleanly while available
// leaves a stopped mark, and the next run counts nothing; one stopped
// cleanly during an outage leaves the outage (counted) to the next run,
// which logs its end.
func TestCanaryCleanStopIsNoOutage(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	r1 := startRun(t, dir, &now)
	r1.c.avail.round(true)
	now = now.Add(time.Second)
	r1.c.closeStore(true)

	now = now.Add(time.Minute)
	r2 := startRun(t, dir, &now)
	r2.check("run after a clean stop", 0, 0)
	r2.c.avail.round(true)
	r2.check("run after a clean stop, up", 1, 0)
	sameMessages(t, "run after a clean stop", r2.messages(), []string{"canary available"})
	now = now.Add(time.Second)
	r2.c.avail.round(false)
	down := now
	r2.check("an outage", 0, 1)
	r2.c.closeStore(true)

	now = now.Add(time.Minute)
	r3 := startRun(t, dir, &now)
	r3.check("run after a clean stop during an outage", 0, 0)
	r3.c.avail.round(true)
	sameMessages(t, "run after a clean stop during an outage", r3.messages(),
		[]string{"canary outage carried over from an earlier run (" + causeNotRunning + ")", "canary available again"})
	if got, want := r3.outageMs(), now.Sub(down); got != want {
		t.Fatalf("outage_ms %v, want %v", got, want)
	}
	r3.crash()
}

// TestAvailabilitySavesAMarkAtMostEvery: while available, a mark is saved
// at each change and then at most once per every (not at every round), so
// the last mark is never more than every plus a round behind; an outage's
// start is saved at once.
func TestAvailabilitySavesAMarkAtMostEvery(t *testing.T) {
	now := time.Unix(1000, 0)
	var saved []mark
	a := availability{m: newMetrics(prometheus.NewRegistry(), "a"), now: func() time.Time { return now },
		save: func(m mark) error { saved = append(saved, m); return nil }, every: 5 * time.Second}
	const round = 500 * time.Millisecond
	for range 120 { // a minute of rounds
		now = now.Add(round)
		a.round(true)
		a.late(false)
	}
	if n := len(saved); n < 12 || n > 13 {
		t.Fatalf("%d marks saved over a minute of 120 rounds, want 12 or 13 (one per 5 s)", n)
	}
	for i, m := range saved {
		if m.state != markUp {
			t.Fatalf("mark %d is %+v, want up", i, m)
		}
		if i > 0 {
			if gap := m.at.Sub(saved[i-1].at); gap < 5*time.Second || gap >= 5*time.Second+round {
				t.Fatalf("marks %d and %d %v apart, want from 5 s to 5 s plus a round", i-1, i, gap)
			}
		}
	}
	if last := saved[len(saved)-1]; now.Sub(last.at) >= 5*time.Second {
		t.Fatalf("the last mark %v before the last round, want under 5 s", now.Sub(last.at))
	}
	saved = nil
	now = now.Add(round)
	a.round(false)
	now = now.Add(round)
	a.round(false)
	now = now.Add(round)
	a.round(true)
	want := []mark{{markDown, now.Add(-2 * round)}, {markUp, now}}
	same := func(a, b mark) bool { return a.state == b.state && a.at.Equal(b.at) }
	if len(saved) != 2 || !same(saved[0], want[0]) || !same(saved[1], want[1]) {
		t.Fatalf("an outage and its end saved %+v, want %+v", saved, want)
	}
}

// TestSinkMarkFormat: a mark is 10 bytes (doc.go) and survives a reopen;
// one of another version, length or state is refused with errMark, never
// read as a mark, and the next save replaces it.
func TestSinkMarkFormat(t *testing.T) {
	m := mark{state: markDown, at: time.Unix(0, 42)}
	if got, want := encodeMark(m), []byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 42}; !bytes.Equal(got, want) {
		t.Fatalf("encoded %v, want %v", got, want)
	}
	dir := t.TempDir()
	s, err := OpenSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.loadMark(); err != nil || got.state != markNone {
		t.Fatalf("a new store's mark: %+v %v, want none", got, err)
	}
	if err := s.saveMark(m); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenSink(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.loadMark(); err != nil || got.state != m.state || !got.at.Equal(m.at) {
		t.Fatalf("after reopen: %+v %v, want %+v", got, err, m)
	}
	for _, raw := range [][]byte{
		{2, 1, 0, 0, 0, 0, 0, 0, 0, 42},    // a newer version
		{1, 1, 0, 0, 0, 0, 0, 0, 42},       // 9 bytes
		{1, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0}, // 11 bytes
		{1, 4, 0, 0, 0, 0, 0, 0, 0, 42},    // no such state
		{1, 0, 0, 0, 0, 0, 0, 0, 0, 42},    // "none" is never stored
	} {
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(stateBucket).Put(markKey, raw) }); err != nil {
			t.Fatal(err)
		}
		if got, err := s.loadMark(); !errors.Is(err, errMark) || got.state != markNone {
			t.Fatalf("%v loaded as %+v, %v; want errMark and no mark", raw, got, err)
		}
	}
	if _, err := decodeMark(nil); !errors.Is(err, errMark) {
		t.Fatalf("an empty mark decoded: %v", err)
	}
	if err := s.saveMark(mark{state: markUp, at: time.Unix(7, 0)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.loadMark(); err != nil || got.state != markUp {
		t.Fatalf("after replacing an unreadable mark: %+v %v", got, err)
	}
}

// FuzzDecodeMark: a stored mark either decodes to one that encodes back to
// the same bytes, or is refused with errMark.
func FuzzDecodeMark(f *testing.F) {
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 42})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 42})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMark(b)
		if err != nil {
			if !errors.Is(err, errMark) || m.state != markNone {
				t.Fatalf("%v: %+v, %v", b, m, err)
			}
			return
		}
		if got := encodeMark(m); !bytes.Equal(got, b) {
			t.Fatalf("%v decoded to %+v, which encodes to %v", b, m, got)
		}
	})
}
