package runner

// canary.go checks the brokers' canaries (sluiced --canary, broker/canary)
// at the end of the scenarios that run them (leader-kill, all-crash): once
// healed and drained, every broker's canary must be available again, and
// no run of any broker may have counted a mismatch — an acknowledged canary
// record lost, skipped by a committed offset, or found at another offset.
// Counters restart with each broker process, so the brokers' logs (every
// run appended) are read for "canary mismatch" lines as well as /metrics.

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
func checkCanaries(ctx context.Context, c *cluster.Cluster) (findings, summary []string) {
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
