package broker

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/broker/httpapi/redriveapi"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/queue"
)

// produceDeadLetters writes n dead letters to dlq with franz-go, as the
// queue API or payload/retry writes them: message ids m0..m<n-1>, keys
// k<i%5>, source partition i%parts, class permanent for every third.
func produceDeadLetters(t *testing.T, cl *kgo.Client, dlq string, parts, n int, from int) {
	t.Helper()
	t0 := time.Now().Add(-time.Hour)
	for i := from; i < from+n; i++ {
		class := "transient"
		if i%3 == 0 {
			class = "permanent"
		}
		m := queue.Meta{SourceTopic: "jobs", SourcePartition: int32(i % parts), SourceOffset: int64(i), Group: "workers",
			FirstSeen: t0, Attempt: 1, Due: t0.Add(time.Duration(i) * time.Second), Tier: -1, DeadReason: "exhausted",
			History: []queue.Failure{{At: t0, Class: class, Error: fmt.Sprintf("boom %d", i)}}}
		if class == "permanent" {
			m.DeadReason = "permanent"
		}
		r := &kgo.Record{Topic: dlq, Partition: int32(i % parts), Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "p%d", i),
			Headers: []kgo.RecordHeader{{Key: httpapi.MessageIDHeader, Value: fmt.Appendf(nil, "m%d", i)}, {Key: "h", Value: []byte("v")}}}
		for _, h := range m.Headers() {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// idempotentConsumer reads topic from the start and processes each
// message id once; copies counts every record of an id.
type idempotentConsumer struct {
	processed map[string]bool
	copies    map[string]int
	records   []*kgo.Record
}

func consumeByMessageID(t *testing.T, seeds []string, topic string, want int) idempotentConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := idempotentConsumer{processed: map[string]bool{}, copies: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(c.processed) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d message ids", topic, len(c.processed), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			c.records = append(c.records, r)
			for _, h := range r.Headers {
				if h.Key == httpapi.MessageIDHeader {
					c.copies[string(h.Value)]++
					c.processed[string(h.Value)] = true // processing is idempotent by message id
				}
			}
		})
	}
	// Whatever else is there arrives within a short read too.
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	cl.PollFetches(short).EachRecord(func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == httpapi.MessageIDHeader {
				c.copies[string(h.Value)]++
			}
		}
	})
	return c
}

func redriveView(t *testing.T, base, id string) redriveapi.View {
	t.Helper()
	var v redriveapi.View
	if code := getJSON(t, base+"/v1/redrives/"+id, &v); code != http.StatusOK {
		t.Fatalf("GET redrive %s: %d %+v", id, code, v)
	}
	return v
}

func startRedrive(t *testing.T, base, dlq, body string) redriveapi.View {
	t.Helper()
	var v redriveapi.View
	if code := postInto(t, base+"/v1/dlq/"+dlq+"/redrives", body, &v); code != http.StatusAccepted {
		t.Fatalf("start redrive of %s with %s: %d %+v", dlq, body, code, v)
	}
	return v
}

// TestRedriveExactlyOnceAcrossRestart is issue 22's redrive test on one
// broker: 120 dead letters are redriven to the source topic at 30 records
// per second per partition; the broker is restarted halfway; the job
// resumes and finishes, and an idempotent consumer (by message_id) of the
// source sees every dead letter once, each copy published once, with its
// key, value and message id kept, its retry headers dropped and
// sluice.redrive.source naming its DLQ record. Records dead-lettered after
// the start are not taken (the scope is frozen). A filtered redrive to a
// shadow topic takes only its key and class; a cancelled one stops.
func TestRedriveExactlyOnceAcrossRestart(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	base := httpBase(b)
	for _, body := range []string{`{"name":"jobs","partitions":2}`, `{"name":"jobs.dlq","partitions":2}`, `{"name":"jobs.shadow","partitions":1}`} {
		if code, out := postJSON(t, base+"/v1/topics", body); code != http.StatusCreated {
			t.Fatalf("create %s: %d %v", body, code, out)
		}
	}
	cl := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 120
	produceDeadLetters(t, cl, "jobs.dlq", 2, n, 0)

	// Bad requests are refused with a 4xx that says why.
	for body, want := range map[string]string{
		`{}`:                          "target is required",
		`{"target":"nope"}`:           "nope",
		`{"target":"jobs","rate":-1}`: "rate",
		`{"target":"jobs","from_offset":9,"to_offset":3}`: "not after",
		`{"target":"jobs.dlq"}`:                           "DLQ itself",
	} {
		code, out := postJSON(t, base+"/v1/dlq/jobs.dlq/redrives", body)
		if errObj, _ := out["error"].(map[string]any); code/100 != 4 || errObj == nil || !strings.Contains(fmt.Sprint(errObj["message"]), want) {
			t.Errorf("start with %s: %d %v, want a 4xx naming %q", body, code, out, want)
		}
	}

	job := startRedrive(t, base, "jobs.dlq", `{"target":"jobs","rate":30}`)
	if job.State != "running" || job.Total != n || job.Target != "jobs" || job.DLQ != "jobs.dlq" {
		t.Fatalf("started %+v", job)
	}
	// Dead-lettered after the start: outside the frozen scope.
	produceDeadLetters(t, cl, "jobs.dlq", 2, 10, n)

	brokertest.EventuallyWhy(t, 30*time.Second, "a third redriven", func() (bool, string) {
		v := redriveView(t, base, job.ID)
		return v.Redriven >= n/3, fmt.Sprintf("%+v", v)
	})
	cl.Close()
	stop() // halfway
	b = startBroker(t, cfg)
	base = httpBase(b)
	mid := redriveView(t, base, job.ID)
	if mid.State != "running" || mid.Redriven >= n {
		t.Fatalf("after the restart: %+v", mid)
	}
	t.Logf("after the restart: decided %d of %d, redriven %d", mid.Decided, mid.Total, mid.Redriven)
	brokertest.EventuallyWhy(t, 60*time.Second, "the redrive done", func() (bool, string) {
		v := redriveView(t, base, job.ID)
		return v.State == "done", fmt.Sprintf("%+v", v)
	})
	done := redriveView(t, base, job.ID)
	if done.Decided != n || done.Redriven+done.Deduped != n || done.Skipped != 0 {
		t.Fatalf("done: %+v", done)
	}
	c := consumeByMessageID(t, []string{b.KafkaAddr()}, "jobs", n)
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if !c.processed[id] || c.copies[id] != 1 {
			t.Errorf("%s: processed %v, %d copies", id, c.processed[id], c.copies[id])
		}
	}
	for i := n; i < n+10; i++ {
		if c.copies[fmt.Sprintf("m%d", i)] != 0 {
			t.Errorf("m%d dead-lettered after the start was redriven", i)
		}
	}
	r := c.records[0]
	var hs []queue.Header
	for _, h := range r.Headers {
		hs = append(hs, queue.Header{Key: h.Key, Value: h.Value})
		if strings.HasPrefix(h.Key, queue.HeaderPrefix) {
			t.Errorf("copy keeps %s", h.Key)
		}
	}
	src := ""
	for _, h := range hs {
		if h.Key == queue.HeaderRedriveSource {
			src = string(h.Value)
		}
	}
	jid, p, off, err := queue.ParseRedriveSource(src)
	if err != nil || jid != job.ID || p != r.Partition {
		t.Fatalf("copy %s/%s at %d: source %q (%v)", r.Key, r.Value, r.Partition, src, err)
	}
	// The DLQ record it names has the same key and value.
	var listing struct {
		Messages []struct {
			Offset        int64   `json:"offset"`
			MessageKey    *string `json:"message_key"`
			PayloadBase64 string  `json:"payload_base64"`
		} `json:"messages"`
	}
	if code := getJSON(t, fmt.Sprintf("%s/v1/topics/jobs.dlq/messages?partition=%d&offset=%d&limit=1", base, p, off), &listing); code != 200 ||
		len(listing.Messages) != 1 || *listing.Messages[0].MessageKey != string(r.Key) {
		t.Fatalf("DLQ record %d/%d: %d %+v, copy key %s", p, off, code, listing, r.Key)
	}

	// kcat reads the copies and their headers too (stdout only: its
	// "Reached end" notices on stderr would cut into a line).
	if kcat, err := exec.LookPath("kcat"); err == nil {
		kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer kcancel()
		out, err := exec.CommandContext(kctx, kcat, "-C", "-b", b.KafkaAddr(), "-t", "jobs", "-o", "beginning", "-e", "-q", "-f", `%k %s %h\n`).Output()
		if err != nil || strings.Count(string(out), queue.HeaderRedriveSource+"="+job.ID+"/") != n || !strings.Contains(string(out), "message_id=m7") ||
			strings.Contains(string(out), queue.HeaderPrefix) {
			t.Errorf("kcat reads %d copies of job %s (want %d), m7 %v, retry headers %v: %q (%v)", strings.Count(string(out), queue.HeaderRedriveSource+"="+job.ID+"/"),
				job.ID, n, strings.Contains(string(out), "message_id=m7"), strings.Contains(string(out), queue.HeaderPrefix), kcatOdd(string(out), job.ID), err)
		}
	} else {
		t.Log("kcat is not installed: the copies were read with franz-go only")
	}

	// A filtered redrive to a shadow topic: key k1, class transient.
	shadow := startRedrive(t, base, "jobs.dlq", `{"target":"jobs.shadow","message_key":"k1","error_class":"transient"}`)
	brokertest.EventuallyWhy(t, 30*time.Second, "the shadow redrive done", func() (bool, string) {
		v := redriveView(t, base, shadow.ID)
		return v.State == "done", fmt.Sprintf("%+v", v)
	})
	want := 0
	for i := range n + 10 {
		if i%5 == 1 && i%3 != 0 {
			want++
		}
	}
	sc := consumeByMessageID(t, []string{b.KafkaAddr()}, "jobs.shadow", want)
	for id, k := range sc.copies {
		var i int
		fmt.Sscanf(id, "m%d", &i)
		if i%5 != 1 || i%3 == 0 || k != 1 {
			t.Errorf("shadow holds %s (%d copies): not key k1 and class transient once", id, k)
		}
	}
	if v := redriveView(t, base, shadow.ID); v.Redriven != int64(want) || v.Skipped != int64(n+10-want) {
		t.Errorf("shadow redrive %+v, want %d redriven", v, want)
	}

	// A slow redrive is cancelled: it stops.
	slow := startRedrive(t, base, "jobs.dlq", `{"target":"jobs.shadow","rate":2}`)
	var cancelled redriveapi.View
	if code := postInto(t, base+"/v1/redrives/"+slow.ID+"/cancel", `{}`, &cancelled); code != 200 || cancelled.State != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	brokertest.EventuallyWhy(t, 10*time.Second, "the cancelled job let go", func() (bool, string) {
		v := redriveView(t, base, slow.ID)
		return v.Runner == nil, fmt.Sprintf("%+v", v)
	})
	after := redriveView(t, base, slow.ID)
	if after.State != "cancelled" || after.Decided >= after.Total {
		t.Fatalf("cancelled job %+v", after)
	}
	var list struct{ Redrives []redriveapi.View }
	if code := getJSON(t, base+"/v1/dlq/jobs.dlq/redrives", &list); code != 200 || len(list.Redrives) != 3 || list.Redrives[2].ID != job.ID {
		t.Fatalf("list: %d %+v", code, list)
	}
	if code, out := httpGet(t, base+"/v1/redrives/nope"); code != http.StatusNotFound {
		t.Fatalf("unknown redrive: %d %s", code, out)
	}
}

// TestClusterRedriveSurvivesItsRunnersDeath: on three brokers, with the
// DLQ and the source replicated three times, the broker running a redrive
// is stopped halfway; another broker claims the job once the runner's
// claim is gone, resumes it from the recorded progress, and finishes; an
// idempotent consumer of the source sees every dead letter once, and no
// dead letter was published twice.
func TestClusterRedriveSurvivesItsRunnersDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	cl := testClient(t, c.brokers[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createReplicatedTopic(t, cl, "jobs", 2, 3)
	createReplicatedTopic(t, cl, "jobs.dlq", 2, 3)
	const n = 40
	produceDeadLetters(t, cl, "jobs.dlq", 2, n, 0)
	cl.Close()
	// A producer's retry may have written a dead letter twice: each DLQ
	// record is to be redriven once.
	inDLQ := consumeByMessageID(t, c.seeds(), "jobs.dlq", n).copies

	base := httpBase(c.brokers[0])
	job := startRedrive(t, base, "jobs.dlq", `{"target":"jobs","rate":10}`)
	var runner int32
	brokertest.EventuallyWhy(t, 90*time.Second, "a runner a fifth of the way", func() (bool, string) {
		v := redriveView(t, base, job.ID)
		if v.Runner != nil {
			runner = *v.Runner
		}
		return v.Runner != nil && v.Redriven >= n/5, fmt.Sprintf("%+v", v)
	})
	c.stops[runner-1]()
	var other int32 = 1
	if runner == 1 {
		other = 2
	}
	base = httpBase(c.brokers[other-1])
	mid := redriveView(t, base, job.ID)
	t.Logf("broker %d stopped at decided %d of %d", runner, mid.Decided, mid.Total)
	if mid.State != "running" || mid.Redriven >= n {
		t.Fatalf("after the stop: %+v", mid)
	}
	brokertest.EventuallyWhy(t, 180*time.Second, "the redrive done on another broker", func() (bool, string) {
		v := redriveView(t, base, job.ID)
		return v.State == "done", fmt.Sprintf("%+v", v)
	})
	done := redriveView(t, base, job.ID)
	if total := int64(len(got0(inDLQ))); done.Decided != total || done.Redriven+done.Deduped != total {
		t.Fatalf("done: %+v, DLQ holds %d records", done, total)
	}
	var seeds []string
	for i, b := range c.brokers {
		if int32(i+1) != runner {
			seeds = append(seeds, b.KafkaAddr())
		}
	}
	got := consumeByMessageID(t, seeds, "jobs", n)
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if !got.processed[id] || got.copies[id] != inDLQ[id] {
			t.Errorf("%s: processed %v, %d copies of its %d DLQ records", id, got.processed[id], got.copies[id], inDLQ[id])
		}
	}
}

// got0 lists every record counted in copies, once per copy.
func got0(copies map[string]int) []string {
	var out []string
	for id, k := range copies {
		for range k {
			out = append(out, id)
		}
	}
	return out
}

// TestRedriveTenantsAndACLs: a redrive is its tenant's: another tenant
// neither sees nor cancels it, and views show tenant-local names; starting
// one needs WRITE on the target.
func TestRedriveTenantsAndACLs(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-pw\n")
	b := startBroker(t, cfg)
	admin := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}.with(basic("admin", "admin-pw"))
	users := tenantHTTPSetup(t, admin, map[string]string{"ann": "acme", "gus": "globex"})
	ann, gus := users["ann"], users["gus"]
	awaitAuthenticated(t, ann)
	awaitAuthenticated(t, gus)
	for _, name := range []string{"jobs", "jobs.dlq", "jobs.shadow"} {
		ann.must(http.StatusCreated, "POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"partitions":1}`, name))
	}
	gus.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"jobs.dlq","partitions":1}`)
	ann.must(http.StatusOK, "POST", "/v1/topics/jobs.dlq/messages:publish", `{"messages":[{"message_id":"a1","payload":"x"},{"message_id":"a2","payload":"y"}]}`)

	job := ann.must(http.StatusAccepted, "POST", "/v1/dlq/jobs.dlq/redrives", `{"target":"jobs"}`)
	id, _ := job["id"].(string)
	if job["dlq"] != "jobs.dlq" || job["target"] != "jobs" || id == "" {
		t.Fatalf("started %v", job)
	}
	eventuallyTrue(t, "ann's redrive done", func() (bool, string) {
		v := ann.must(http.StatusOK, "GET", "/v1/redrives/"+id, "")
		return v["state"] == "done" && jsonNum(v["redriven"]) == "2", fmt.Sprint(v)
	})
	if code, out, _ := gus.call("GET", "/v1/redrives/"+id, ""); code != http.StatusNotFound {
		t.Fatalf("another tenant reads the job: %d %v", code, out)
	}
	if code, out, _ := gus.call("POST", "/v1/redrives/"+id+"/cancel", ""); code != http.StatusNotFound {
		t.Fatalf("another tenant cancels the job: %d %v", code, out)
	}
	if out := gus.must(http.StatusOK, "GET", "/v1/dlq/jobs.dlq/redrives", ""); fmt.Sprint(out["redrives"]) != "[]" {
		t.Fatalf("another tenant's DLQ of the same name lists %v", out)
	}
	if out := ann.must(http.StatusOK, "GET", "/v1/dlq/jobs.dlq/redrives", ""); !strings.Contains(fmt.Sprint(out["redrives"]), id) {
		t.Fatalf("ann's DLQ lists %v", out)
	}
	// No WRITE on the target: refused.
	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"acme","bindings":[
		{"resource_type":"topic","resource_name":"jobs.shadow","principal":"User:ann","operation":"write","permission":"deny"}]}`)
	eventuallyTrue(t, "the DENY applies", func() (bool, string) {
		code, out, _ := ann.call("POST", "/v1/dlq/jobs.dlq/redrives", `{"target":"jobs.shadow"}`)
		return code == http.StatusForbidden && strings.Contains(fmt.Sprint(out), "jobs.shadow"), fmt.Sprint(code, out)
	})
}

// kcatOdd is the lines of kcat's output without job's source header.
func kcatOdd(out, job string) []string {
	var odd []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, queue.HeaderRedriveSource+"="+job+"/") {
			odd = append(odd, l)
		}
	}
	return odd
}
