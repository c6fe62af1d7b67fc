package cluster_test

// redrive_kill_test.go: a dead-letter redrive (issue 22,
// broker/httpapi/redriveapi) survives kill -9 of the broker running it, on
// real sluiced processes that lose what they had not fsynced
// (--crash-loses-unsynced). The in-process version, with clean stops, is
// broker/TestClusterRedriveSurvivesItsRunnersDeath.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/queue"
)

// redriveView is the part of a redrive job's view the test reads.
type redriveView struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Runner   *int32 `json:"runner"`
	Total    int64  `json:"total"`
	Decided  int64  `json:"decided"`
	Redriven int64  `json:"redriven"`
	Deduped  int64  `json:"deduped"`
	Skipped  int64  `json:"skipped"`
}

func redriveCall(ctx context.Context, c *cluster.Cluster, id int32, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Broker(id).HTTPAddr+path, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// viewFrom polls the job's view from any running broker until ok accepts
// it, within stepTimeout·2.
func viewUntil(t *testing.T, c *cluster.Cluster, job, what string, ok func(redriveView) bool) redriveView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*stepTimeout)
	defer cancel()
	var last redriveView
	var lastErr error
	for {
		for _, id := range c.Up() {
			var v redriveView
			if lastErr = redriveCall(ctx, c, id, http.MethodGet, "/v1/redrives/"+job, "", &v); lastErr == nil {
				last = v
				if ok(v) {
					return v
				}
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: last view %+v, last error %v", what, 2*stepTimeout, last, lastErr)
		case <-time.After(pollEvery):
		}
	}
}

// copiesOf reads topic from its start to its high watermarks and counts the
// records of each message_id and of each sluice.redrive.source value.
func copiesOf(t *testing.T, c *cluster.Cluster, topic string) (byID, bySource map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	// Control records are kept so the reader knows its position when a
	// partition ends with one.
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.KeepControlRecords())
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	byID, bySource = map[string]int{}, map[string]int{}
	for {
		done := true
		for p, end := range want {
			done = done && next[p] >= end
		}
		if done {
			return byID, bySource
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s to %v: got to %v", topic, want, next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			for _, h := range r.Headers {
				switch h.Key {
				case "message_id":
					byID[string(h.Value)]++
				case queue.HeaderRedriveSource:
					bySource[string(h.Value)]++
				}
			}
		})
	}
}

// TestRedriveSurvivesKill9OfItsRunner: on three sluiced processes, with the
// DLQ and the target replicated three times, the broker running a redrive
// is killed -9 a fifth of the way (and restarted once another broker has
// claimed the job), then the next runner is killed -9 too, past half way.
// A third broker finishes the job from the recorded progress; every dead
// letter is on the target exactly once by message_id, each DLQ record
// redriven once, and the job's counts add up.
func TestRedriveSurvivesKill9OfItsRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluiced processes and versitygw")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, cluster.Config{ExtraArgs: []string{"--crash-loses-unsynced"}})
	const (
		parts = 2
		n     = 400
	)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(stepTimeout))
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"jobs", "jobs.dlq"} {
		if _, err := adm.CreateTopic(ctx, parts, cluster.Size, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		for p := range int32(parts) {
			waitLeader(t, c, topic, p, func(leader, _ int32) bool { return leader > 0 })
		}
	}
	t0 := time.Now().Add(-time.Hour)
	for i := range n {
		m := queue.Meta{SourceTopic: "jobs", SourcePartition: int32(i % parts), SourceOffset: int64(i), Group: "workers",
			FirstSeen: t0, Attempt: 1, Due: t0, Tier: -1, DeadReason: "exhausted",
			History: []queue.Failure{{At: t0, Class: "transient", Error: fmt.Sprintf("boom %d", i)}}}
		r := &kgo.Record{Topic: "jobs.dlq", Partition: int32(i % parts), Key: fmt.Appendf(nil, "k%d", i%5),
			Value: fmt.Appendf(nil, "p%d", i), Headers: []kgo.RecordHeader{{Key: "message_id", Value: fmt.Appendf(nil, "m%d", i)}}}
		for _, h := range m.Headers() {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	inDLQ, _ := copiesOf(t, c, "jobs.dlq")
	dlqRecords := 0
	for i := range n {
		if inDLQ[fmt.Sprintf("m%d", i)] == 0 {
			t.Fatalf("m%d missing from the DLQ", i)
		}
	}
	for _, k := range inDLQ {
		dlqRecords += k
	}

	// 20 copies a second per DLQ partition, about 10 s of publishing:
	// several copies are published between two writes of the progress
	// (every 500 ms), so a kill -9 almost surely leaves some on the target
	// that the progress does not count, which the next runner must find.
	var job redriveView
	if err := redriveCall(ctx, c, 1, http.MethodPost, "/v1/dlq/jobs.dlq/redrives", `{"target":"jobs","rate":20}`, &job); err != nil {
		t.Fatal(err)
	}
	killRunner := func(past int64, not int32) int32 {
		t.Helper()
		v := viewUntil(t, c, job.ID, fmt.Sprintf("a runner other than %d past %d copies", not, past), func(v redriveView) bool {
			return v.State == "running" && v.Runner != nil && *v.Runner != not && v.Redriven >= past
		})
		if v.State != "running" {
			t.Fatalf("the job ended before the kill: %+v", v)
		}
		if err := c.Kill(*v.Runner); err != nil {
			t.Fatal(err)
		}
		t.Logf("broker %d killed -9 while running the redrive at %d of %d redriven", *v.Runner, v.Redriven, v.Total)
		return *v.Runner
	}
	first := killRunner(n/5, 0)
	second := viewUntil(t, c, job.ID, "another broker claims the job", func(v redriveView) bool {
		return v.Runner != nil && *v.Runner != first
	})
	if err := c.Restart(ctx, first); err != nil {
		t.Fatal(err)
	}
	killed := killRunner(n/2, first)
	if killed != *second.Runner {
		t.Logf("broker %d claimed the job after %d, and broker %d ran it when killed", *second.Runner, first, killed)
	}
	done := viewUntil(t, c, job.ID, "the redrive done", func(v redriveView) bool { return v.State == "done" })
	if err := c.Restart(ctx, killed); err != nil {
		t.Fatal(err)
	}
	t.Logf("done: %+v", done)
	if done.Decided != int64(dlqRecords) || done.Total != int64(dlqRecords) || done.Redriven+done.Deduped != int64(dlqRecords) {
		t.Fatalf("done: %+v, the DLQ holds %d records", done, dlqRecords)
	}
	byID, bySource := copiesOf(t, c, "jobs")
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if byID[id] != inDLQ[id] {
			t.Errorf("%s: %d copies on the target for its %d DLQ records", id, byID[id], inDLQ[id])
		}
	}
	for src, k := range bySource {
		if k != 1 {
			t.Errorf("DLQ record %s redriven %d times", src, k)
		}
	}
	if len(bySource) != dlqRecords {
		t.Errorf("%d DLQ records redriven, the DLQ holds %d", len(bySource), dlqRecords)
	}
}
