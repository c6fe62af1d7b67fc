package e2e

// A follower away longer than its leader's local log reaches back (paused
// with SIGSTOP while the leader uploads and deletes its local segments)
// resumes, is told its offset moved to tiered storage, restarts at the
// remote end and copies only the leader's local tail; afterwards it holds
// the same log as the leader, reading what is older from object storage.

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestFollowerBehindLeaderLocalLog(t *testing.T) {
	c := startCluster(t, "--retention-check-interval", "100ms", "--tier-chunk-bytes", "4096")
	const topic = "behind"
	str := func(s string) *string { return &s }
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, clusterSize, map[string]*string{
		"segment.bytes": str("8192"), "remote.upload.bytes": str("16384"), "remote.upload.max.delay.ms": str("0"),
		"local.retention.ms": str("0"), "retention.ms": str("-1"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	leader, _, _ := c.waitLeader(topic, 0, nil, defaultTimeout)
	var follower int32
	for _, id := range c.ids(leader) {
		follower = id
		break
	}
	cl := c.manualProducer()
	produceValues(t, cl, topic, 0, "before-", 50)
	c.pause(follower)
	for round := range 100 { // small batches, so the leader's log has many segments
		produceValues(t, cl, topic, 0, fmt.Sprintf("away-%d-", round), 30)
	}
	metric := func(id int32, name string, labels ...string) float64 {
		_, text := httpGet(t, "http://"+c.node(id).httpAddr+"/metrics")
		return parseMetrics(t, text)[seriesKey(name, labels...)]
	}
	eventually(t, defaultTimeout, "the leader's local log starts above the paused follower's end", func() (bool, string) {
		end := metric(leader, "sluice_tier_remote_end_offset", "partition", "0", "topic", topic)
		start := metric(leader, "sluice_partition_log_start_offset", "partition", "0", "topic", topic)
		deleted := metric(leader, "sluice_tier_local_segments_deleted_total")
		return end > 2000 && deleted >= 5, fmt.Sprintf("remote end %v, log start %v, local segments deleted %v", end, start, deleted)
	})
	c.resume(follower)
	produceValues(t, cl, topic, 0, "after-", 50)
	hw, err := c.highWatermark(leader, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range []int32{follower, leader} {
				for _, l := range c.grepLog(id, "topic=behind") {
					t.Log(id, l)
				}
			}
		}
	})
	eventually(t, defaultTimeout, "the follower caught up", func() (bool, string) {
		fhw, err := c.highWatermark(follower, topic, 0)
		return err == nil && fhw >= hw, fmt.Sprintf("follower's high watermark %d (%v), leader's %d", fhw, err, hw)
	})
	if lines := c.grepLog(follower, "restarting it at the remote end"); len(lines) == 0 {
		t.Fatal("the follower caught up without restarting at the remote end: the test did not put it behind the leader's local log")
	}
	want, err := c.logBelow(leader, topic, 0, hw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.logBelow(follower, topic, 0, hw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the follower's log below the high watermark %d differs from the leader's (%d and %d bytes)", hw, len(got), len(want))
	}
}
