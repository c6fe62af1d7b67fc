package runner

// canary.go checks the brokers' canaries (sluiced --canary, broker/canary)
// at the end of the scenarios that run them (leader-kill, all-crash): once
// healed and drained, every broker's canary must be available again, and
// no run of any broker may have counted a mismatch — an acknowledged canary
// record lost, skipped by a committed offset, or found at another offset.
// Counters restart with each broker process, so the brokers' logs (every
// run appended) are read for "canary mismatch" lines as well as /metrics.
// A canary dies with its broker; its next run reports the outage the kill
// caused (broker/canary/doc.go), so every broker a fault killed must have
// logged, in its run after its last restart, that outage ("the broker was
// not running") and then "canary available again" — unless its canary had
// never been available before that restart ("canary available" in no
// earlier run), when there was no availability to lose.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/chaos/cluster"
)

// canaryArgs are the sluiced flags of a run with canaries: rounds fast
// enough to see a failover, publishes that fail before one ends.
var canaryArgs = []string{"--canary", "--canary-interval", "500ms", "--canary-timeout", "2s"}

// canaryWait bounds the wait for every canary to be available again.
const canaryWait = 2 * time.Minute

// checkCanaries returns the findings (each fails the run) and a summary
// line per broker.
// killed are the brokers the scenario killed (faultEnv.killed).
func checkCanaries(ctx context.Context, c *cluster.Cluster, killed map[int32]bool) (findings, summary []string) {
	for id := int32(1); id <= cluster.Size; id++ {
		b := c.Broker(id)
		series := func(name string, labels ...string) string {
			s := name + `{az="` + b.AZ + `"`
			for i := 0; i+1 < len(labels); i += 2 {
				s += `,` + labels[i] + `="` + labels[i+1] + `"`
			}
			return s + "}"
		}
		var (
			m    map[string]float64
			err  error
			up   bool
			poll = time.NewTicker(250 * time.Millisecond)
		)
		wctx, cancel := context.WithTimeout(ctx, canaryWait)
		for !up {
			m, err = c.Metrics(wctx, id)
			up = err == nil && m[series("sluice_canary_available")] == 1
			if up {
				break
			}
			select {
			case <-wctx.Done():
			case <-poll.C:
				continue
			}
			break
		}
		cancel()
		poll.Stop()
		if !up {
			findings = append(findings, fmt.Sprintf("canary of broker %d (AZ %s) not available %v after the drain (last error: %v)", id, b.AZ, canaryWait, err))
		}
		if m != nil {
			var mismatches float64
			for _, k := range []string{"lost", "offset", "skipped"} {
				mismatches += m[series("sluice_canary_mismatches_total", "kind", k)]
			}
			if mismatches > 0 {
				findings = append(findings, fmt.Sprintf("canary of broker %d (AZ %s): %v mismatches in its last run", id, b.AZ, mismatches))
			}
			summary = append(summary, fmt.Sprintf("canary of broker %d (AZ %s), last run: %v attempts, %v publish failures, %v outages, %v results, %v duplicates, %v mismatches",
				id, b.AZ, m[series("sluice_canary_attempts_total")], m[series("sluice_canary_failures_total", "stage", "publish")], m[series("sluice_canary_outages_total")],
				m[series("sluice_canary_latency_seconds_count")], m[series("sluice_canary_duplicates_total")], mismatches))
		}
		// Outages of every run of the broker (its counters restart with it).
		if down, err := grepLog(b.LogPath, "canary unavailable"); err == nil {
			summary = append(summary, fmt.Sprintf("canary of broker %d (AZ %s): %d outages logged over all its runs (at most 20 counted)", id, b.AZ, len(down)))
		}
		if killed[id] {
			f, s := checkCanaryRestart(id, b.AZ, b.LogPath)
			findings = append(findings, f...)
			summary = append(summary, s...)
		}
		lines, err := grepLog(b.LogPath, "canary mismatch")
		if err != nil {
			findings = append(findings, fmt.Sprintf("canary of broker %d: read its log: %v", id, err))
		}
		for _, l := range lines {
			findings = append(findings, fmt.Sprintf("broker %d: %s", id, l))
		}
	}
	return findings, summary
}

// grepLog returns the lines of path holding s (at most 20).
func grepLog(path, s string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) && len(out) < 20 {
			out = append(out, sc.Text())
		}
	}
	return out, sc.Err()
}

// Lines a broker's log holds (chaos/cluster/doc.go; broker/canary's log
// messages and the cause of an outage across a restart).
const (
	runStartLine     = "=== chaos/cluster: start #"
	canaryUpLine     = "canary available" // also the start of "canary available again"
	canaryAgainLine  = "canary available again"
	canaryNotRunning = "the broker was not running"
)

// canaryRestart is what a broker's log says of its canary across the
// broker's last restart.
type canaryRestart struct {
	starts int // runs of the broker, each begun with a runStartLine
	// upBefore: a run before the last logged its canary available, so the
	// last run has an outage to report.
	upBefore bool
	// reported is the last run's first line naming canaryNotRunning (the
	// outage its start found, counted or carried over); recovered its
	// first "canary available again" line after that one ("" if none).
	reported, recovered string
}

// readCanaryRestart reads the log at path.
func readCanaryRestart(path string) (canaryRestart, error) {
	f, err := os.Open(path)
	if err != nil {
		return canaryRestart{}, err
	}
	defer func() { _ = f.Close() }()
	var (
		r      canaryRestart
		upThis bool // the current run logged its canary available
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, runStartLine):
			r.starts++
			r.upBefore = r.upBefore || upThis
			upThis = false
			r.reported, r.recovered = "", ""
		case strings.Contains(l, canaryUpLine):
			upThis = true
			if r.reported != "" && r.recovered == "" && strings.Contains(l, canaryAgainLine) {
				r.recovered = l
			}
		case strings.Contains(l, canaryNotRunning) && r.reported == "":
			r.reported = l
		}
	}
	return r, sc.Err()
}

// checkCanaryRestart checks the log of broker id, which the scenario
// killed: its run after its last restart reported the outage and its end.
func checkCanaryRestart(id int32, az, logPath string) (findings, summary []string) {
	r, err := readCanaryRestart(logPath)
	who := fmt.Sprintf("canary of broker %d (AZ %s)", id, az)
	switch {
	case err != nil:
		findings = append(findings, fmt.Sprintf("%s: read its log: %v", who, err))
	case r.starts < 2:
		findings = append(findings, fmt.Sprintf("%s: its broker was killed, but its log shows %d start(s), no restart", who, r.starts))
	case !r.upBefore:
		summary = append(summary, fmt.Sprintf("%s: killed before it was ever available; no outage to report", who))
	case r.reported == "":
		findings = append(findings, fmt.Sprintf("%s: its run after the last restart (start #%d) did not report the outage of its kill (no line with %q)",
			who, r.starts, canaryNotRunning))
	case r.recovered == "":
		findings = append(findings, fmt.Sprintf("%s: its run after the last restart (start #%d) reported the outage of its kill but logged no %q after it",
			who, r.starts, canaryAgainLine))
	default:
		summary = append(summary, fmt.Sprintf("%s: the outage across its last restart (start #%d) reported and recovered after %s ms",
			who, r.starts, logField(r.recovered, "outage_ms")))
	}
	return findings, summary
}

// logField is the value of key in a log line, console (key=value) or JSON
// ("key":value); "" when the line has none.
func logField(line, key string) string {
	for _, p := range []string{" " + key + "=", `"` + key + `":`} {
		if _, v, ok := strings.Cut(line, p); ok {
			if i := strings.IndexAny(v, " ,}\n"); i >= 0 {
				v = v[:i]
			}
			return v
		}
	}
	return ""
}
