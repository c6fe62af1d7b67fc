package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
