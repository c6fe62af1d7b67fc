package e2e

// Tiering against real processes: sluiced on Versity's S3 gateway, records
// written and read back with kcat. The topic uploads small objects and keeps
// nothing locally once uploaded, so kcat's replay from the beginning reads
// object storage for most of the log.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

func TestTieredReplayWithKcat(t *testing.T) {
	kcat := requireTool(t, "kcat")
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b := startBroker(t, brokerOptions{extraArgs: []string{
		"--object-store", srv.URL(fmt.Sprintf("e2e-%d", time.Now().UnixNano())),
		"--retention-check-interval", "100ms", "--tier-chunk-bytes", "4096",
	}})
	adm := newAdmin(t, b)
	const topic, n = "tiered-kcat", 600
	str := func(s string) *string { return &s }
	createTopic(t, adm, topic, 1, map[string]*string{
		"segment.bytes": str("8192"), "remote.upload.bytes": str("16384"), "remote.upload.max.delay.ms": str("0"),
		"local.retention.ms": str("0"), "retention.ms": str("-1"),
	})
	var in, want strings.Builder
	for i := range n {
		k, v := fmt.Sprintf("key-%03d", i), fmt.Sprintf("value %d %s", i, strings.Repeat("x", 100))
		fmt.Fprintf(&in, "%s:%s\n", k, v)
		fmt.Fprintf(&want, "%s=%s\n", k, v)
	}
	// Several producer runs, so the log has many batches and segments.
	lines := strings.SplitAfter(in.String(), "\n")
	for i := 0; i < n; i += 100 {
		runTool(t, time.Minute, strings.Join(lines[i:i+100], ""), kcat, "-P", "-b", b.kafkaAddr, "-t", topic, "-K:",
			"-X", "acks=all", "-X", "enable.idempotence=true")
	}
	metric := func(name string) float64 {
		_, text := httpGet(t, "http://"+b.httpAddr+"/metrics")
		return parseMetrics(t, text)[seriesKey(name, "partition", "0", "topic", topic)]
	}
	eventually(t, defaultTimeout, "most of the log in object storage and gone locally", func() (bool, string) {
		end := metric("sluice_tier_remote_end_offset")
		_, text := httpGet(t, "http://"+b.httpAddr+"/metrics")
		deleted := parseMetrics(t, text)[seriesKey("sluice_tier_local_segments_deleted_total")]
		return end >= n/2 && deleted > 0, fmt.Sprintf("remote end %v, local segments deleted %v", end, deleted)
	})
	got := runTool(t, time.Minute, "", kcat, "-C", "-b", b.kafkaAddr, "-t", topic, "-o", "beginning", "-e", "-f", `%k=%s\n`)
	if got != want.String() {
		t.Fatalf("kcat replay from the beginning:\n%s\nwant:\n%s", lastN(got, 1500), lastN(want.String(), 1500))
	}
	_, text := httpGet(t, "http://"+b.httpAddr+"/metrics")
	if read := parseMetrics(t, text)[seriesKey("sluice_tier_remote_read_bytes_total")]; read == 0 {
		t.Fatal("kcat's replay read nothing from object storage")
	}
}
