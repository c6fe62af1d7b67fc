package broker

// Issue 22's queue figures against one real in-process broker, consumed
// through the HTTP queue API (messages:fetch, :ack, :nack) as a client
// would, each benchmark's arms alternating round after round in one
// process so the shared machine's noise lands on both:
//
//   - BenchmarkQueuePoison: a relaxed topic of 4 partitions preloaded with
//     queueBenchRecords records, drained by one member that acks every
//     record and nacks every poison one (transient, so it goes through the
//     retry tiers, then to the DLQ at retry.max.attempts). Arms: 0% and 1%
//     poison. Figures: good records acked per second (first fetch → last
//     good ack) and the time until the last poison record is dead-lettered.
//   - BenchmarkQueuePausedKey: a per-key-strict topic of 1 partition fed
//     at queuePauseRate records/s over HTTP publish (one record a request,
//     up to queuePublishers in flight; keys k0..k8 and one key "stuck", a
//     tenth of the records), consumed by one member that
//     acks each record. Arm "paused": the first "stuck" record is nacked,
//     which pauses that key for the rest of the arm; arm "none": it is
//     acked. Figure: delivery latency (publish request sent → fetched by
//     the member) of the other keys' records, p50 and p99.
//
// Both report with b.ReportMetric (per arm, over all rounds); run with
// -benchtime Nx for N rounds (BENCHMARKS.md has the commands).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	queueBenchRecords = 10000 // per poison round
	queuePauseRate    = 200   // records/s offered in a pause round
	queuePauseArm     = 4 * time.Second
	queuePublishers   = 16 // publish requests in flight at most, a pause round
)

// benchQueue is the HTTP queue API as one group member.
type benchQueue struct {
	tb     testing.TB
	base   string
	group  string
	member string
	gen    int64
	client *http.Client
}

func benchPost(tb testing.TB, c *http.Client, url string, body any, out any) {
	tb.Helper()
	if err := postErr(c, url, body, out); err != nil {
		tb.Fatal(err)
	}
}

// postErr POSTs body as JSON and decodes a 2xx answer into out.
func postErr(c *http.Client, url string, body any, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, buf.String())
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			return fmt.Errorf("POST %s: %w: %s", url, err, buf.String())
		}
	}
	return nil
}

func benchJoin(tb testing.TB, base, group, topic string) *benchQueue {
	q := &benchQueue{tb: tb, base: base, group: group, client: &http.Client{Timeout: 30 * time.Second}}
	var j struct {
		MemberID   string `json:"member_id"`
		Generation int64  `json:"generation"`
	}
	benchPost(tb, q.client, base+"/v1/groups/"+group+"/members:join", map[string]any{"topics": []string{topic}, "session_timeout_ms": 300000}, &j)
	q.member, q.gen = j.MemberID, j.Generation
	return q
}

type benchQMsg struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       *string           `json:"message_key"`
	MessageID string            `json:"message_id"`
	Headers   map[string]string `json:"headers"`
	Payload   *string           `json:"payload"`
	Attempt   int               `json:"attempt"`
}

type benchQRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Class     string `json:"error_class,omitempty"`
	Error     string `json:"error,omitempty"`
}

type benchQResults struct {
	Results []struct {
		Status  string `json:"status"`
		ToTopic string `json:"to_topic"`
	} `json:"results"`
}

func (q *benchQueue) fetch(waitMs int) []benchQMsg {
	var f struct {
		Messages []benchQMsg `json:"messages"`
	}
	benchPost(q.tb, q.client, q.base+"/v1/groups/"+q.group+"/messages:fetch",
		map[string]any{"member_id": q.member, "generation": q.gen, "wait_ms": waitMs}, &f)
	return f.Messages
}

func (q *benchQueue) settle(verb string, refs []benchQRef) benchQResults {
	var out benchQResults
	if len(refs) == 0 {
		return out
	}
	field := "acks"
	if verb == "nack" {
		field = "nacks"
	}
	benchPost(q.tb, q.client, q.base+"/v1/groups/"+q.group+"/messages:"+verb,
		map[string]any{"member_id": q.member, "generation": q.gen, field: refs}, &out)
	return out
}

// benchPublish publishes msgs to topic over HTTP, in batches of 500.
func benchPublish(tb testing.TB, c *http.Client, base, topic string, msgs []map[string]any) {
	for len(msgs) > 0 {
		n := min(500, len(msgs))
		benchPost(tb, c, base+"/v1/topics/"+topic+"/messages:publish", map[string]any{"messages": msgs[:n]}, nil)
		msgs = msgs[n:]
	}
}

// BenchmarkQueuePoison: see the file's comment.
func BenchmarkQueuePoison(b *testing.B) {
	br := startBroker(b, testBrokerConfig(b))
	base := httpBase(br)
	c := &http.Client{Timeout: 30 * time.Second}
	arms := []int{0, 1} // percent poison
	rate := map[int][]float64{}
	dead := map[int][]float64{}
	round := 0
	for b.Loop() {
		order := arms
		if round%2 == 1 {
			order = []int{arms[1], arms[0]}
		}
		for _, pct := range order {
			topic := fmt.Sprintf("poison-%d-%d", round, pct)
			benchPost(b, c, base+"/v1/topics", map[string]any{"name": topic, "partitions": 4, "configs": map[string]string{
				"delivery.order": "relaxed", "retry.backoff.ms": "100,200", "retry.jitter": "0", "retry.max.attempts": "3"}}, nil)
			msgs := make([]map[string]any, queueBenchRecords)
			poison := 0
			for i := range msgs {
				m := map[string]any{"message_key": fmt.Sprintf("k%d", i%64), "message_id": fmt.Sprintf("m%d", i), "payload": strings.Repeat("x", 200)}
				if pct > 0 && i%(100/pct) == 0 {
					m["headers"] = map[string]string{"poison": "1"}
					poison++
				}
				msgs[i] = m
			}
			benchPublish(b, c, base, topic, msgs)
			q := benchJoin(b, base, "g-"+topic, topic)
			good, deadN := 0, 0
			start := time.Now()
			var lastGood, lastDead time.Duration
			deadline := start.Add(2 * time.Minute)
			for good < queueBenchRecords-poison || deadN < poison {
				if time.Now().After(deadline) {
					b.Fatalf("%s: %d good acked of %d, %d dead of %d after 2 minutes", topic, good, queueBenchRecords-poison, deadN, poison)
				}
				var acks, nacks []benchQRef
				for _, m := range q.fetch(100) {
					ref := benchQRef{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
					if m.Headers["poison"] == "1" {
						ref.Class, ref.Error = "transient", "poison"
						nacks = append(nacks, ref)
					} else {
						acks = append(acks, ref)
					}
				}
				for _, r := range q.settle("ack", acks).Results {
					if r.Status == "ok" {
						good++
						lastGood = time.Since(start)
					}
				}
				for _, r := range q.settle("nack", nacks).Results {
					if r.Status == "dead_letter" {
						deadN++
						lastDead = time.Since(start)
					}
				}
			}
			rate[pct] = append(rate[pct], float64(good)/lastGood.Seconds())
			if poison > 0 {
				dead[pct] = append(dead[pct], lastDead.Seconds())
			}
			b.Logf("round %d, %d%% poison: %d good acked in %v (%.0f/s), %d dead-lettered, the last at %v",
				round, pct, good, lastGood.Round(time.Millisecond), float64(good)/lastGood.Seconds(), deadN, lastDead.Round(time.Millisecond))
		}
		round++
	}
	b.ReportMetric(benchMedian(rate[0]), "good-recs/s-0pct")
	b.ReportMetric(benchMedian(rate[1]), "good-recs/s-1pct")
	b.ReportMetric(benchMedian(rate[1])/benchMedian(rate[0]), "ratio-1pct/0pct")
	b.ReportMetric(benchMedian(dead[1]), "s-to-last-dead-1pct")
}

func benchMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchPercentile is the nearest-rank p-th benchPercentile of v (sorted in place).
func benchPercentile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(float64(len(v))*p+0.999999) - 1
	return v[max(0, min(i, len(v)-1))]
}

// BenchmarkQueuePausedKey: see the file's comment.
func BenchmarkQueuePausedKey(b *testing.B) {
	br := startBroker(b, testBrokerConfig(b))
	base := httpBase(br)
	c := &http.Client{Timeout: 30 * time.Second}
	arms := []string{"none", "paused"}
	lat := map[string][]time.Duration{}
	round := 0
	for b.Loop() {
		order := arms
		if round%2 == 1 {
			order = []string{arms[1], arms[0]}
		}
		for _, arm := range order {
			topic := fmt.Sprintf("strict-%d-%s", round, arm)
			benchPost(b, c, base+"/v1/topics", map[string]any{"name": topic, "partitions": 1, "configs": map[string]string{
				"delivery.order": "per-key-strict"}}, nil)
			q := benchJoin(b, base, "g-"+topic, topic)
			// The producer: one record per tick; its send time (taken
			// before the publish request) is kept by message id.
			var mu sync.Mutex
			sentAt := map[string]time.Time{}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				pc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: queuePublishers}}
				tick := time.NewTicker(time.Second / queuePauseRate)
				defer tick.Stop()
				slots := make(chan struct{}, queuePublishers)
				var inflight sync.WaitGroup
				defer inflight.Wait()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					key := fmt.Sprintf("k%d", i%9)
					if i%10 == 0 {
						key = "stuck"
					}
					id := strconv.Itoa(i)
					select {
					case slots <- struct{}{}:
					case <-stop:
						return
					}
					mu.Lock()
					sentAt[id] = time.Now()
					mu.Unlock()
					inflight.Go(func() {
						defer func() { <-slots }()
						if err := postErr(pc, base+"/v1/topics/"+topic+"/messages:publish", map[string]any{"messages": []map[string]any{
							{"message_key": key, "message_id": id, "payload": "x"}}}, nil); err != nil {
							b.Error(err)
						}
					})
				}
			}()
			var got []time.Duration
			paused := false
			end := time.Now().Add(queuePauseArm)
			for time.Now().Before(end) {
				var acks, nacks []benchQRef
				for _, m := range q.fetch(100) {
					now := time.Now()
					ref := benchQRef{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
					key := ""
					if m.Key != nil {
						key = *m.Key
					}
					if key == "stuck" {
						if arm == "paused" && !paused {
							ref.Class, ref.Error = "transient", "held"
							nacks = append(nacks, ref)
							paused = true
							continue
						}
						acks = append(acks, ref)
						continue
					}
					acks = append(acks, ref)
					mu.Lock()
					t0, ok := sentAt[m.MessageID]
					mu.Unlock()
					if ok && now.Sub(t0) >= 0 {
						got = append(got, now.Sub(t0))
					}
				}
				for _, r := range q.settle("nack", nacks).Results {
					if r.Status != "paused" {
						b.Fatalf("%s: the nack of the stuck key answered %q, want paused", topic, r.Status)
					}
				}
				q.settle("ack", acks)
			}
			close(stop)
			<-done
			lat[arm] = append(lat[arm], got...)
			b.Logf("round %d, %s: %d deliveries of other keys, p50 %v, p99 %v", round, arm, len(got),
				benchPercentile(slices.Clone(got), 0.5).Round(time.Microsecond), benchPercentile(slices.Clone(got), 0.99).Round(time.Microsecond))
		}
		round++
	}
	for _, arm := range arms {
		b.ReportMetric(float64(benchPercentile(lat[arm], 0.5).Microseconds())/1000, "p50-ms-"+arm)
		b.ReportMetric(float64(benchPercentile(lat[arm], 0.99).Microseconds())/1000, "p99-ms-"+arm)
	}
}
