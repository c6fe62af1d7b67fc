package cluster_test

// canary_test.go runs every broker of a real cluster with --canary and
// reads what the canaries report over GET /metrics: in steady state each
// AZ's canary is available with no mismatch; when a canary partition's
// leader is killed (SIGKILL) another AZ's canary reports the outage (failed
// publishes, an outage counted), then recovers; after the killed broker's
// restart every canary is available again and none counted a mismatch,
// and the killed broker's canary counts the outage its kill caused.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/cluster"
)

const canaryTopic = "__sluice_canary"

func canarySeries(name, az string, extra ...string) string {
	s := name + `{az="` + az + `"`
	for i := 0; i+1 < len(extra); i += 2 {
		s += `,` + extra[i] + `="` + extra[i+1] + `"`
	}
	return s + "}"
}

// canaryState is what one broker's canary exports.
type canaryState struct {
	available, outages, publishFailures, results, mismatches float64
}

func readCanary(ctx context.Context, c *cluster.Cluster, id int32) (canaryState, error) {
	m, err := c.Metrics(ctx, id)
	if err != nil {
		return canaryState{}, err
	}
	az := c.Broker(id).AZ
	avail, ok := m[canarySeries("sluice_canary_available", az)]
	if !ok {
		return canaryState{}, fmt.Errorf("broker %d exports no sluice_canary_available", id)
	}
	s := canaryState{available: avail, outages: m[canarySeries("sluice_canary_outages_total", az)],
		publishFailures: m[canarySeries("sluice_canary_failures_total", az, "stage", "publish")],
		results:         m[canarySeries("sluice_canary_latency_seconds_count", az)]}
	for _, k := range []string{"lost", "offset", "skipped"} {
		s.mismatches += m[canarySeries("sluice_canary_mismatches_total", az, "kind", k)]
	}
	return s, nil
}

// waitCanary polls broker id's canary until ok accepts it.
func waitCanary(t *testing.T, c *cluster.Cluster, id int32, within time.Duration, what string, ok func(canaryState) bool) canaryState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last canaryState
	var lastErr error
	for {
		s, err := readCanary(ctx, c, id)
		if err != nil {
			if ctx.Err() == nil {
				lastErr = err // not the wait's own end
			}
			s = last
		} else if s.available != last.available {
			t.Logf("broker %d's canary: %+v", id, s)
		}
		last = s
		if err == nil && s.mismatches > 0 {
			t.Fatalf("broker %d's canary counts %v mismatches (its log names them)", id, s.mismatches)
		}
		if err == nil && ok(s) {
			return s
		}
		select {
		case <-ctx.Done():
			logCanaryLeaders(t, c) // an outage that lasts is often a partition with no leader
			if lastErr != nil {
				dumpGoroutines(t, c, id)
			}
			t.Fatalf("broker %d's canary: not %s within %v: last %+v, last error %v", id, what, within, last, lastErr)
		case <-tick.C:
		}
	}
}

func TestClusterCanary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluiced processes and versitygw")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{
		Dir:       t.TempDir(),
		Sluiced:   sluicedPath,
		VersityGW: versitygwPath,
		Logger:    zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger(),
		// A publish fails well before a failover (2 to 3.5 s here) ends.
		ExtraArgs: []string{"--canary", "--canary-interval", "200ms", "--canary-timeout", "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for id := int32(1); id <= cluster.Size; id++ {
				logTail(t, c.Broker(id))
			}
		}
	})

	// Steady state: every AZ's canary sees its records through to results.
	for id := int32(1); id <= cluster.Size; id++ {
		waitCanary(t, c, id, 90*time.Second, "available with 20 results", func(s canaryState) bool {
			return s.available == 1 && s.results >= 20
		})
	}

	old, _ := waitLeader(t, c, canaryTopic, 0, func(leader, _ int32) bool { return leader > 0 })
	watch := old%cluster.Size + 1
	before := waitCanary(t, c, watch, stepTimeout, "available", func(s canaryState) bool { return s.available == 1 })
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed broker %d, leader of %s/0; watching broker %d's canary", old, canaryTopic, watch)
	down := waitCanary(t, c, watch, stepTimeout, "reporting the outage", func(s canaryState) bool {
		// Counted, not sampled: a failover that ends between two polls of a
		// loaded machine's /metrics still shows as an outage.
		return s.outages > before.outages && s.publishFailures > before.publishFailures
	})
	t.Logf("outage reported: %+v", down)
	up := waitCanary(t, c, watch, stepTimeout, "available again", func(s canaryState) bool {
		return s.available == 1 && s.results >= down.results+20
	})
	t.Logf("recovered: %+v", up)

	if err := c.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	for id := int32(1); id <= cluster.Size; id++ {
		first := waitCanary(t, c, id, 90*time.Second, "available", func(s canaryState) bool { return s.available == 1 })
		if id == old && first.outages < 1 {
			// Its canary died with it; the new run counts the outage the
			// kill caused from the mark the old run kept (broker/canary).
			t.Fatalf("broker %d's restarted canary counts no outage: %+v", id, first)
		}
		// Records published after the restart reach their results too.
		waitCanary(t, c, id, stepTimeout, "available with 20 more results", func(s canaryState) bool {
			return s.available == 1 && s.results >= first.results+20
		})
	}
}

// dumpGoroutines has broker id print its goroutines (SIGQUIT: the Go
// runtime's dump, and exit) and copies its log next to the test's, so a
// broker that stopped answering shows where it waits.
func dumpGoroutines(t *testing.T, c *cluster.Cluster, id int32) {
	b := c.Broker(id)
	pid := b.PID()
	if pid == 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	time.Sleep(2 * time.Second) // the dump is written before the exit; no assertion waits on it
	raw, err := os.ReadFile(b.LogPath)
	if err != nil {
		t.Log(err)
		return
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("%s-broker%d.log", t.Name(), id))
	if err := os.WriteFile(out, raw, 0o600); err == nil {
		t.Logf("broker %d's log with its goroutines: %s", id, out)
	}
}

// logCanaryLeaders logs the leader and epoch of each canary partition.
func logCanaryLeaders(t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p := range int32(3) {
		leader, epoch, err := c.Leader(ctx, canaryTopic, p)
		t.Logf("%s/%d: leader %d, epoch %d, %v", canaryTopic, p, leader, epoch, err)
	}
}
