package broker

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/node"
)

// canaryValue is the value of series (a whole series name with labels) on
// b's /metrics, or -1 when absent.
func canaryValue(t *testing.T, b *Broker, series string) float64 {
	t.Helper()
	resp, err := http.Get(httpBase(b) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// TestCanaryStopsWithBrokerAndResumes runs a broker's canary at a fast
// pace (5 ms rounds: the consumer's fetch wait is kept at 100 ms or more,
// as with a 5 ms wait it got no records at all), stops the broker (Run
// must return within stopLimit, the canary with it), and restarts it on
// the same data dir: the canary carries on from its store and its group's
// committed offsets, with no mismatch.
func TestCanaryStopsWithBrokerAndResumes(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Canary, cfg.CanaryInterval, cfg.CanaryTimeout = true, 5*time.Millisecond, time.Second
	const results = `sluice_canary_latency_seconds_count{az="az1"}`
	mismatches := func(b *Broker) float64 {
		var n float64
		for _, k := range []string{"lost", "offset", "skipped"} {
			n += canaryValue(t, b, `sluice_canary_mismatches_total{az="az1",kind="`+k+`"}`)
		}
		return n
	}
	for run := 1; run <= 2; run++ {
		b, stop := startStoppableBroker(t, cfg)
		brokertest.EventuallyWhy(t, 60*time.Second, "100 canary results", func() (bool, string) {
			n := canaryValue(t, b, results)
			return n >= 100, fmt.Sprintf("run %d: %v results, available %v", run, n, canaryValue(t, b, `sluice_canary_available{az="az1"}`))
		})
		if n := mismatches(b); n != 0 {
			t.Fatalf("run %d: %v mismatches", run, n)
		}
		stop() // fails the test if Run does not return within stopLimit
	}
}

// TestClusterSizeCountsEmbeddedMembers: the canary waits for as many live
// brokers as the embedded etcd has members before it creates its topic
// (so a first start does not give it two replicas of three); a lone broker
// or one on an external etcd waits for itself only.
func TestClusterSizeCountsEmbeddedMembers(t *testing.T) {
	b := &Broker{Node: &node.Node{}}
	for _, c := range []struct {
		initial   string
		endpoints []string
		want      int
	}{
		{"", nil, 1},
		{"1=http://a:2380,2=http://b:2380,3=http://c:2380", nil, 3},
		{"1=http://a:2380,2=http://b:2380,3=http://c:2380", []string{"http://etcd:2379"}, 1},
	} {
		b.Cfg.Meta.InitialCluster, b.Cfg.Meta.Endpoints = c.initial, c.endpoints
		if got := b.clusterSize(); got != c.want {
			t.Errorf("initial cluster %q, endpoints %v: %d, want %d", c.initial, c.endpoints, got, c.want)
		}
	}
}

// awaitCanaryResults waits until the canary of b has stored n results in
// all (sluice_canary_latency_seconds_count).
func awaitCanaryResults(t *testing.T, b *Broker, n float64) {
	t.Helper()
	brokertest.EventuallyWhy(t, 60*time.Second, fmt.Sprintf("%v canary results", n), func() (bool, string) {
		got := canaryValue(t, b, `sluice_canary_latency_seconds_count{az="az1"}`)
		return got >= n, fmt.Sprintf("%v results", got)
	})
}

// TestCanaryCommitsOncePerRound: the canary's consumer commits at most once
// per round however many fetches a round's records arrive in (each commit
// is a write to etcd; issue 23's cost target), and still commits: every
// round's offsets are committed within a round or two.
func TestCanaryCommitsOncePerRound(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Canary, cfg.CanaryInterval, cfg.CanaryTimeout = true, 100*time.Millisecond, time.Second
	b := startBroker(t, cfg)
	const (
		attempts = `sluice_canary_attempts_total{az="az1"}`
		commits  = `sluice_kafka_requests_total{api="OffsetCommit"}`
	)
	awaitCanaryResults(t, b, 30)
	a0, c0 := canaryValue(t, b, attempts), canaryValue(t, b, commits)
	awaitCanaryResults(t, b, 90)
	a1, c1 := canaryValue(t, b, attempts), canaryValue(t, b, commits)
	rounds := (a1 - a0) / 3 // one record per partition of the 3 a round
	if c1-c0 > rounds+2 {
		t.Fatalf("%v commits in %v rounds: more than one a round", c1-c0, rounds)
	}
	if c1-c0 < rounds/3 {
		t.Fatalf("%v commits in %v rounds: offsets not committed each round or two", c1-c0, rounds)
	}
}

// TestCanaryReconcileAsksNoMetadata: reading the committed offsets back
// each round costs one OffsetFetch and nothing else (franz-go's request
// sharder followed every OffsetFetch answered below v10 with a Metadata
// request, a round's worth of broker work for nothing; issue 23's cost).
func TestCanaryReconcileAsksNoMetadata(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Canary, cfg.CanaryInterval, cfg.CanaryTimeout = true, 100*time.Millisecond, time.Second
	b := startBroker(t, cfg)
	const (
		attempts  = `sluice_canary_attempts_total{az="az1"}`
		fetches   = `sluice_kafka_requests_total{api="OffsetFetch"}`
		metadata  = `sluice_kafka_requests_total{api="Metadata"}`
		reconcile = `sluice_canary_failures_total{az="az1",stage="reconcile"}`
	)
	awaitCanaryResults(t, b, 30)
	a0, f0, m0, r0 := canaryValue(t, b, attempts), canaryValue(t, b, fetches), canaryValue(t, b, metadata), canaryValue(t, b, reconcile)
	awaitCanaryResults(t, b, 90)
	a1, f1, m1, r1 := canaryValue(t, b, attempts), canaryValue(t, b, fetches), canaryValue(t, b, metadata), canaryValue(t, b, reconcile)
	rounds := (a1 - a0) / 3 // one record per partition of the 3 a round
	if f1-f0 < rounds/2 {
		t.Fatalf("%v offset fetches in %v rounds: the committed offsets are not read back each round", f1-f0, rounds)
	}
	if r1 > r0 {
		t.Fatalf("%v reconcile failures in %v rounds", r1-r0, rounds)
	}
	if m1-m0 > rounds/10+2 {
		t.Fatalf("%v Metadata requests in %v rounds (%v offset fetches): the reconcile asks for metadata", m1-m0, rounds, f1-f0)
	}
}
