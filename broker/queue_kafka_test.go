package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/payload/retry"
	"github.com/sluice-mq/sluice/queue"
)

// TestRetryHelperPoisonThroughTiersToDLQ is issue 22's poison test for
// Kafka clients: the payload/retry Consumer (contract read with
// DescribeConfigs) and Nack against a real broker. A record that always
// fails is delivered 3 times (from the source, tier 0, tier 1), each retry
// no sooner than its due time and its tier's delay less the jitter after
// the nack, then lands in jobs.dlq in its source partition with the
// headers the broker's HTTP nack writes (its other headers, message_id,
// and queue.Meta.Headers of its history); every other record is processed
// once and the group's committed offsets reach the log end.
func TestRetryHelperPoisonThroughTiersToDLQ(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "jobs", 2, map[string]string{"retry.backoff.ms": "200,400", "retry.jitter": "0.1", "retry.max.attempts": "3"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("m%d", i)
		if i == 7 {
			id = "poison"
		}
		recs = append(recs, &kgo.Record{Topic: "jobs", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("p", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: httpapi.MessageIDHeader, Value: []byte(id)}}})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	c, err := retry.NewConsumer(ctx, retry.Config{Group: "workers", Topics: []string{"jobs"}}, kgo.SeedBrokers(b.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tiers := c.TierTopics(); len(tiers) != 2 || !slices.Contains(tiers, "__retry.workers.jobs.0") || !slices.Contains(tiers, "__retry.workers.jobs.1") {
		t.Fatalf("tiers %v", tiers)
	}

	msgID := func(r *kgo.Record) string {
		for _, h := range r.Headers {
			if h.Key == httpapi.MessageIDHeader {
				return string(h.Value)
			}
		}
		return ""
	}
	processed := map[string]int{}
	var seen, nacked []time.Time
	var attempts []int
	var results []retry.Result
	var source *kgo.Record
	for len(results) < 3 || len(processed) < 9 {
		got, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v (processed %d, nacks %d)", err, len(processed), len(results))
		}
		for _, r := range got {
			if msgID(r) != "poison" {
				processed[msgID(r)]++
				continue
			}
			seen = append(seen, time.Now())
			attempt := 1
			if m, ok, err := queue.Parse(recordHeaders(r)); ok && err == nil {
				attempt = m.Attempt + 1
			}
			attempts = append(attempts, attempt)
			if attempt == 1 {
				source = r
			}
			nacked = append(nacked, time.Now())
			res, err := c.Nack(ctx, r, queue.ClassTransient, fmt.Errorf("boom %d", attempt))
			if err != nil {
				t.Fatalf("nack %d: %v", attempt, err)
			}
			results = append(results, res)
		}
	}
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("poison attempts %v, want [1 2 3]", attempts)
	}
	want := []struct {
		out   queue.Outcome
		topic string
	}{{queue.Retry, "__retry.workers.jobs.0"}, {queue.Retry, "__retry.workers.jobs.1"}, {queue.DeadLetter, "jobs.dlq"}}
	for i, w := range want {
		if r := results[i]; r.Outcome != w.out || r.Topic != w.topic || r.Partition != source.Partition || r.Meta.Attempt != i+1 {
			t.Fatalf("nack %d: %+v, want %v to %s-%d", i+1, r, w.out, w.topic, source.Partition)
		}
	}
	// Lower bounds only: the machine is shared.
	for i, d := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		due := results[i].Due
		if gap := seen[i+1].Sub(nacked[i]); gap < d*9/10-time.Millisecond || seen[i+1].Before(due) || due.Sub(nacked[i]) < d*9/10-time.Millisecond {
			t.Errorf("retry %d came %v after its nack; tier delay %v ±10%%; due %v, nacked %v, seen %v", i+1, gap, d, due, nacked[i], seen[i+1])
		}
	}
	for id, n := range processed {
		if n != 1 {
			t.Errorf("%s processed %d times", id, n)
		}
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The dead letter: key, value, partition, message id and other
	// headers kept; the history in the headers the HTTP nack writes.
	dl := testClient(t, b, kgo.ConsumeTopics("jobs.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var dead *kgo.Record
	for dead == nil {
		fs := dl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read the DLQ: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { dead = r })
	}
	m, ok, err := queue.Parse(recordHeaders(dead))
	if err != nil || !ok {
		t.Fatalf("DLQ headers %v: %v", dead.Headers, err)
	}
	if msgID(dead) != "poison" || string(dead.Value) != "p7" || string(dead.Key) != "k7" || dead.Partition != source.Partition ||
		m.SourceTopic != "jobs" || m.SourcePartition != source.Partition || m.SourceOffset != source.Offset ||
		m.Group != "workers" || m.Attempt != 3 || m.DeadReason != "exhausted" || len(m.History) != 3 ||
		m.History[0].Error != "boom 1" || m.History[2].Error != "boom 3" || m.History[1].Class != "transient" ||
		m.FirstSeen.After(m.History[2].At) {
		t.Fatalf("dead letter %s/%s at %d: %+v", dead.Key, dead.Value, dead.Partition, m)
	}
	var keys, wantKeys []string
	for _, h := range dead.Headers {
		keys = append(keys, h.Key)
	}
	wantKeys = []string{"h", httpapi.MessageIDHeader}
	for _, h := range m.Headers() {
		wantKeys = append(wantKeys, h.Key)
	}
	slices.Sort(keys)
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("dead letter headers %v, want %v", keys, wantKeys)
	}

	// The group's offsets of jobs reach its log end: lag 0.
	adm := kadm.NewClient(admin)
	brokertest.EventuallyWhy(t, 20*time.Second, "workers committed to the end of jobs", func() (bool, string) {
		lags, err := adm.Lag(ctx, "workers")
		if err != nil {
			return false, err.Error()
		}
		l := lags["workers"]
		if l.Error() != nil {
			return false, l.Error().Error()
		}
		total, n := int64(0), 0
		for _, pl := range l.Lag["jobs"] {
			total += pl.Lag
			n++
		}
		return n == 2 && total == 0, fmt.Sprintf("%d partitions of jobs, lag %d", n, total)
	})
}

// TestRetryHelperRefusesStrict: a nack on a per-key-strict topic is
// refused with ErrStrict and writes nothing, as the HTTP nack refuses it.
func TestRetryHelperRefusesStrict(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b)
	createTopic(t, cl, "ordered", 1, map[string]string{"delivery.order": "per-key-strict"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := retry.ContractOf(ctx, cl, "ordered")
	if err != nil || c.Order != queue.OrderPerKeyStrict {
		t.Fatalf("contract %+v: %v", c, err)
	}
	_, err = retry.Nack(ctx, cl, "g", &kgo.Record{Topic: "ordered", Value: []byte("x")}, queue.ClassTransient, errors.New("e"), c)
	if !errors.Is(err, retry.ErrStrict) {
		t.Fatalf("nack on a strict topic: %v", err)
	}
	tds, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range tds {
		if queue.IsRetryTopic(name) || name == "ordered.dlq" {
			t.Fatalf("a refused nack created %s", name)
		}
	}
}

func recordHeaders(r *kgo.Record) []queue.Header {
	out := make([]queue.Header, len(r.Headers))
	for i, h := range r.Headers {
		out[i] = queue.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// TestDeadLetterListing: GET /v1/topics/{dlq}/messages lists dead letters
// (written by the Kafka helper with a permanent class) with their parsed
// history, a page at a time by offset; bad parameters are 400s and an
// unknown topic a 404.
func TestDeadLetterListing(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	cl := testClient(t, b, kgo.RecordPartitioner(retry.Partitioner(kgo.StickyKeyPartitioner(nil))))
	createTopic(t, cl, "jobs", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var src []*kgo.Record
	for i := 0; i < 3; i++ {
		src = append(src, &kgo.Record{Topic: "jobs", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("p", i)),
			Headers: []kgo.RecordHeader{{Key: httpapi.MessageIDHeader, Value: []byte(fmt.Sprint("id", i))}}})
	}
	if err := cl.ProduceSync(ctx, src...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := retry.ContractOf(ctx, cl, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range src {
		if res, err := retry.Nack(ctx, cl, "workers", r, queue.ClassPermanent, fmt.Errorf("bad input %d", i), c); err != nil || res.Topic != "jobs.dlq" {
			t.Fatalf("nack %d: %+v %v", i, res, err)
		}
	}
	type page struct {
		Topic      string
		LogStart   int64 `json:"log_start"`
		LogEnd     int64 `json:"log_end"`
		NextOffset int64 `json:"next_offset"`
		Messages   []struct {
			Offset     int64
			MessageID  string  `json:"message_id"`
			MessageKey *string `json:"message_key"`
			History    *struct {
				SourceTopic     string `json:"source_topic"`
				SourcePartition int32  `json:"source_partition"`
				SourceOffset    int64  `json:"source_offset"`
				Group           string
				Attempts        int
				ErrorClass      string `json:"error_class"`
				LastError       string `json:"last_error"`
				FirstSeenMs     int64  `json:"first_seen_ms"`
				DeadReason      string `json:"dead_reason"`
				Failures        []struct{ Error string }
			}
		}
	}
	get := func(query string, out any) int {
		resp, err := http.Get(base + "/v1/topics/" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode == 200 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var p1, p2 page
	if code := get("jobs.dlq/messages?partition=0&limit=2", &p1); code != 200 || len(p1.Messages) != 2 || p1.NextOffset != 2 || p1.LogEnd != 3 || p1.Topic != "jobs.dlq" {
		t.Fatalf("first page: %d %+v", code, p1)
	}
	if code := get(fmt.Sprintf("jobs.dlq/messages?offset=%d&limit=2", p1.NextOffset), &p2); code != 200 || len(p2.Messages) != 1 || p2.NextOffset != 3 {
		t.Fatalf("second page: %d %+v", code, p2)
	}
	all := append(p1.Messages, p2.Messages...)
	for i, m := range all {
		h := m.History
		if m.Offset != int64(i) || m.MessageID != fmt.Sprint("id", i) || m.MessageKey == nil || *m.MessageKey != fmt.Sprint("k", i) || h == nil ||
			h.SourceTopic != "jobs" || h.SourcePartition != 0 || h.SourceOffset != src[i].Offset || h.Group != "workers" || h.Attempts != 1 ||
			h.ErrorClass != "permanent" || h.LastError != fmt.Sprint("bad input ", i) || h.FirstSeenMs == 0 || h.DeadReason != "permanent" ||
			len(h.Failures) != 1 || h.Failures[0].Error != h.LastError {
			t.Fatalf("dead letter %d: %+v %+v", i, m, h)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?offset=-1", "?partition=1", "?partition=x"} {
		if code := get("jobs.dlq/messages"+q, nil); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", q, code)
		}
	}
	if code := get("nope/messages", nil); code != http.StatusNotFound {
		t.Errorf("unknown topic: %d, want 404", code)
	}
}

// TestAlertRulesNameExportedMetrics parses every deploy/*.rules.yml
// (Prometheus rule groups) and checks each rule's shape and that every
// sluice_ metric its expression names is exported by a broker holding a
// dead letter and running the canary; and that
// sluice_dlq_oldest_age_seconds is the age of that dead letter.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	type ruleFile struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	paths, err := filepath.Glob("../deploy/*.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("rule files %v; want the DLQ and canary rules", paths)
	}
	var files []ruleFile
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var file ruleFile
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		files = append(files, file)
	}

	cfg := testBrokerConfig(t)
	cfg.Canary, cfg.CanaryInterval = true, 100*time.Millisecond
	b := startBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "jobs", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: "jobs", Value: []byte("x")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := retry.ContractOf(ctx, cl, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := retry.Nack(ctx, cl, "workers", rec, queue.ClassPermanent, errors.New("bad"), c); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	scrape := func() string {
		resp, err := http.Get("http://" + b.Cfg.HTTPListen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	scrapeStart := time.Now()
	metrics := scrape()
	scrapeEnd := time.Now()
	if !strings.Contains(metrics, `sluice_dlq_depth{tenant="default",topic="jobs.dlq"} 1`) {
		t.Fatalf("no depth 1 for jobs.dlq")
	}
	var age float64
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, `sluice_dlq_oldest_age_seconds{tenant="default",topic="jobs.dlq"} `); ok {
			age, err = strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The dead letter was stamped between before and after (ms, rounded down).
	if lo, hi := scrapeStart.Sub(after).Seconds(), scrapeEnd.Sub(before).Seconds()+0.001; age < lo || age > hi {
		t.Fatalf("oldest age %v, want in [%v, %v]", age, lo, hi)
	}

	metricName := regexp.MustCompile(`\bsluice_[a-z_]+\b`)
	rules := 0
	for _, file := range files {
		for _, g := range file.Groups {
			if g.Name == "" || len(g.Rules) == 0 {
				t.Errorf("group %+v: a name and rules are required", g)
			}
			for _, r := range g.Rules {
				rules++
				if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
					t.Errorf("rule %+v: alert, expr, labels.severity and annotations.summary are required", r)
				}
				if r.For != "" {
					if _, err := time.ParseDuration(r.For); err != nil {
						t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
					}
				}
				names := metricName.FindAllString(r.Expr, -1)
				if len(names) == 0 {
					t.Errorf("rule %s names no sluice_ metric: %s", r.Alert, r.Expr)
				}
				for _, n := range names {
					if !strings.Contains(metrics, "\n"+n+"{") && !strings.Contains(metrics, "\n"+n+" ") {
						t.Errorf("rule %s names %s, which the broker does not export", r.Alert, n)
					}
				}
			}
		}
	}
	if rules < 7 {
		t.Fatalf("%d rules; want the DLQ and canary rules", rules)
	}
}

// TestRetryConsumerHoldsUntilDue: with the consumer's clock stopped before
// a retry copy's due time, Poll never hands the copy out and the tier
// partition is paused; once the clock passes the due time, the next Poll
// hands it out and the partition is resumed. The clock is injected, so
// nothing here depends on the machine's speed.
func TestRetryConsumerHoldsUntilDue(t *testing.T) {
	// The broker's clock runs two minutes ahead of the consumer's: the
	// broker hands the tier's record out (api_fetch_due.go), and the
	// consumer must hold it by its own clock.
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	cfg := testBrokerConfig(t)
	cfg.Now = func() time.Time { return now().Add(2 * time.Minute) }
	b := startBroker(t, cfg)
	admin := testClient(t, b)
	createTopic(t, admin, "jobs", 1, map[string]string{"retry.backoff.ms": "60000", "retry.jitter": "0"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := retry.NewConsumer(ctx, retry.Config{Group: "g", Topics: []string{"jobs"}, Now: now}, kgo.SeedBrokers(b.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var src *kgo.Record
	for src == nil {
		got, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			src = got[0]
		}
	}
	res, err := c.Nack(ctx, src, queue.ClassTransient, errors.New("later"))
	if err != nil || res.Topic != "__retry.g.jobs.0" || !res.Due.Equal(now().Add(time.Minute)) {
		t.Fatalf("nack: %+v %v", res, err)
	}
	paused := func() bool { return slices.Contains(c.Client().PauseFetchPartitions(nil)[res.Topic], 0) }
	for !paused() {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		got, err := c.Poll(pctx)
		pcancel()
		if len(got) > 0 {
			t.Fatalf("handed out %v before its due time (clock %v, due %v)", got[0], now(), res.Due)
		}
		if ctx.Err() != nil {
			t.Fatalf("the tier partition was never paused: %v", err)
		}
	}
	clock.Store(res.Due.UnixMilli())
	got, err := c.Poll(ctx)
	if err != nil || len(got) != 1 || got[0].Topic != res.Topic || string(got[0].Value) != "a" {
		t.Fatalf("at the due time: %v %v", got, err)
	}
	if m, ok, err := queue.Parse(recordHeaders(got[0])); !ok || err != nil || m.Attempt != 1 || !m.Due.Equal(res.Due) {
		t.Fatalf("retry copy headers: %+v %v", m, err)
	}
	if paused() {
		t.Fatal("the tier partition stays paused after its hold emptied")
	}
}

// TestKafkaFetchOfARetryTierWaitsForDue: a plain Kafka consumer of a retry
// tier gets its records only once due, by the broker's clock, in order:
// the fetch stops before the first record not due, even when a later one
// is due already. On the old code the consumer read all three at once.
func TestKafkaFetchOfARetryTierWaitsForDue(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	cfg := testBrokerConfig(t)
	cfg.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	b := startBroker(t, cfg)
	admin := testClient(t, b)
	const tier = "__retry.g.jobs.0"
	createTopic(t, admin, tier, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := clock.Load()
	due := func(ms int64) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: queue.HeaderDue, Value: []byte(fmt.Sprint(ms))}}
	}
	for _, r := range []*kgo.Record{
		{Topic: tier, Value: []byte("due"), Headers: due(t0 - 1)},
		{Topic: tier, Value: []byte("later"), Headers: due(t0 + 60_000)},
		{Topic: tier, Value: []byte("behind"), Headers: due(t0 - 1)},
	} {
		// One batch each: the fetch cuts at batch boundaries.
		if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := testClient(t, b, kgo.ConsumeTopics(tier), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	poll := func(d time.Duration) {
		pctx, pcancel := context.WithTimeout(ctx, d)
		defer pcancel()
		for pctx.Err() == nil {
			cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
	}
	poll(1500 * time.Millisecond)
	if !slices.Equal(got, []string{"due"}) {
		t.Fatalf("before the second record's due time the consumer read %q, want only [due]", got)
	}
	clock.Store(t0 + 60_000)
	poll(1500 * time.Millisecond)
	if !slices.Equal(got, []string{"due", "later", "behind"}) {
		t.Fatalf("at its due time the consumer has read %q, want [due later behind]", got)
	}
}
