package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/payload/retry"
	"github.com/sluice-mq/sluice/queue"
)

// strictWorker drives a retry.Consumer the way its doc asks: the records
// of one Poll in order, and after a nack of a key no more of that key's
// records of the same Poll (each of them must be one the nack withdrew).
type strictWorker struct {
	t     *testing.T
	c     *retry.Consumer
	fails func(r *kgo.Record, delivery int) (string, bool) // error class, fail?
	log   []string                                         // "value" or "value!" (failed), in processing order
	count map[string]int                                   // deliveries per value
	at    map[string][]time.Time                           // delivery times per value
	nacks []retry.Result
	// resumed: a keys:resume restarts a record's attempts (it comes from
	// the source again), so Attempt is not its delivery count.
	resumed bool
}

func newStrictWorker(t *testing.T, c *retry.Consumer, fails func(*kgo.Record, int) (string, bool)) *strictWorker {
	return &strictWorker{t: t, c: c, fails: fails, count: map[string]int{}, at: map[string][]time.Time{}}
}

// poll runs one Poll (at most wait) and processes what it hands out.
func (w *strictWorker) poll(ctx context.Context, wait time.Duration) {
	w.t.Helper()
	pctx, cancel := context.WithTimeout(ctx, wait)
	got, err := w.c.Poll(pctx)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		w.t.Fatalf("poll: %v", err)
	}
	if ctx.Err() != nil {
		w.t.Fatalf("out of time; processed %v", w.log)
	}
	failed := map[string]bool{}   // keys nacked in this Poll
	withdrawn := map[int64]bool{} // what their nacks withdrew
	for _, r := range got {
		if withdrawn[r.Offset] {
			continue
		}
		if failed[string(r.Key)] {
			w.t.Fatalf("%s (offset %d) came in the Poll after its key's failed record, and the nack did not withdraw it", r.Value, r.Offset)
		}
		v := string(r.Value)
		if a := w.c.Attempt(r); a != w.count[v]+1 && !w.resumed {
			w.t.Fatalf("%s: Attempt %d at its delivery %d", v, a, w.count[v]+1)
		}
		w.count[v]++
		w.at[v] = append(w.at[v], time.Now())
		class, fail := w.fails(r, w.count[v])
		if !fail {
			w.log = append(w.log, v)
			continue
		}
		w.log = append(w.log, v+"!")
		res, err := w.c.Nack(ctx, r, class, fmt.Errorf("fail %s #%d", v, w.count[v]))
		if err != nil {
			w.t.Fatalf("nack %s: %v", v, err)
		}
		w.nacks = append(w.nacks, res)
		failed[string(r.Key)] = true
		for _, o := range res.Withdrawn {
			withdrawn[o] = true
		}
	}
}

// until polls until cond holds.
func (w *strictWorker) until(ctx context.Context, what string, cond func() bool) {
	w.t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			w.t.Fatalf("%s: out of time; processed %v", what, w.log)
		}
		w.poll(ctx, 300*time.Millisecond)
	}
}

// ofKey is the log's entries for values starting with prefix.
func ofKey(log []string, prefix string) []string {
	var out []string
	for _, v := range log {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}

func produceKV(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, kvs ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, kv := range kvs {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(kv[:1]), Value: []byte(kv),
			Headers: []kgo.RecordHeader{{Key: httpapi.MessageIDHeader, Value: []byte("id-" + kv)}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// durableState is the group's committed offset of topic-0 and the lane
// state in its metadata.
func durableState(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string) queue.LaneState {
	t.Helper()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return queue.LaneState{Committed: -1}
	}
	st, err := queue.DecodeState(o.Metadata, o.At)
	if err != nil {
		t.Fatalf("commit metadata %q: %v", o.Metadata, err)
	}
	return st
}

func newStrictConsumer(t *testing.T, ctx context.Context, b *Broker, group, topic string) *retry.Consumer {
	t.Helper()
	c, err := retry.NewConsumer(ctx, retry.Config{Group: group, Topics: []string{topic}}, kgo.SeedBrokers(b.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRetryConsumerStrictKeyPausesInPlace is issue 22's per-key-strict
// test for Kafka clients: key A's first record fails twice (transient)
// and then succeeds. It is delivered again no sooner than its tier's
// delay after each failure; A's later records (also those produced during
// the pause) come only after it succeeds, in order, while key B's records
// flow during the pause. A consumer restart during the pause keeps it:
// the pause is in the group's commit metadata (attempt 1, its due time),
// and the new consumer delivers A's record as attempt 2, at its due time.
// At the end the committed offset is the log end with no pause left.
func TestRetryConsumerStrictKeyPausesInPlace(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": "per-key-strict",
		"retry.backoff.ms": "1500,1500", "retry.jitter": "0", "retry.max.attempts": "4"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "B1", "A2", "B2")
	fails := func(r *kgo.Record, n int) (string, bool) {
		return queue.ClassTransient, string(r.Value) == "A0" && n <= 2
	}

	c1 := newStrictConsumer(t, ctx, b, "shippers", "orders")
	w := newStrictWorker(t, c1, fails)
	w.until(ctx, "first delivery of everything but A's later records", func() bool {
		return len(w.nacks) == 1 && slices.Contains(w.log, "B2")
	})
	first := w.nacks[0]
	if !first.Paused || first.Outcome != queue.Retry || first.Topic != "orders" || first.Offset != 0 || first.Meta.Attempt != 1 {
		t.Fatalf("first nack: %+v", first)
	}
	// B flows during the pause; A's new record waits behind A0.
	produceKV(t, ctx, admin, "orders", "B3", "A3")
	w.until(ctx, "B3 during the pause", func() bool { return slices.Contains(w.log, "B3") })
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!"}) {
		t.Fatalf("key A during its pause: %v", got)
	}
	if err := c1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	st := durableState(t, ctx, admin, "shippers", "orders")
	if st.Committed != 0 || len(st.Pauses) != 1 || st.Pauses[0].Scope != queue.ScopeOf(queue.OrderPerKeyStrict, []byte("A")) ||
		st.Pauses[0].First != 0 || st.Pauses[0].Attempts != 1 || !st.Pauses[0].Due.Equal(first.Due) {
		t.Fatalf("durable state during the pause: %+v (nack due %v)", st, first.Due)
	}
	// The group's lag lists the pause, as for an HTTP queue group.
	resp, err := http.Get("http://" + b.Cfg.HTTPListen + "/v1/groups/shippers/lag")
	if err != nil {
		t.Fatal(err)
	}
	var lag struct {
		Partitions []struct {
			Paused []struct {
				MessageKey *string `json:"message_key"`
				FirstHeld  int64   `json:"first_held_offset"`
			} `json:"paused"`
		} `json:"partitions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&lag)
	resp.Body.Close()
	if err != nil || len(lag.Partitions) != 1 || len(lag.Partitions[0].Paused) != 1 ||
		lag.Partitions[0].Paused[0].MessageKey == nil || *lag.Partitions[0].Paused[0].MessageKey != "A" {
		t.Fatalf("lag during the pause: %+v %v", lag, err)
	}
	c1.Close()

	// A restarted consumer keeps the pause and its attempt count.
	c2 := newStrictConsumer(t, ctx, b, "shippers", "orders")
	defer c2.Close()
	w.c = c2
	w.until(ctx, "A's records after A0 succeeds", func() bool { return slices.Contains(w.log, "A3") })
	w.poll(ctx, 300*time.Millisecond) // acknowledges A3

	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0!", "A0", "A1", "A2", "A3"}) {
		t.Fatalf("key A processed as %v", got)
	}
	for _, v := range []string{"B0", "B1", "B2", "B3", "A1", "A2", "A3"} {
		if w.count[v] != 1 {
			t.Fatalf("%s delivered %d times (log %v)", v, w.count[v], w.log)
		}
	}
	if len(w.nacks) != 2 || w.nacks[1].Meta.Attempt != 2 || !w.nacks[1].Paused {
		t.Fatalf("nacks %+v", w.nacks)
	}
	at := w.at["A0"]
	for i := 1; i < 3; i++ {
		if due := w.nacks[i-1].Due; at[i].Before(due) {
			t.Fatalf("A0 delivery %d at %v, before its due time %v", i+1, at[i], due)
		}
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "shippers", "orders")
		return st.Committed == 8 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
}

// TestRetryConsumerStrictExhaustedStaysPaused: a record of key A that
// always fails is delivered retry.max.attempts times in place; its last
// nack does not dead-letter it: the key stays paused with no due time
// (the commit metadata is an HTTP pause's), so A's later record is not
// delivered for 2 s past the time a next attempt would have been due,
// while key B flows (on per-key-strict; on per-partition-strict nothing
// else of the partition comes). Then the pause is skipped, over HTTP
// (keys:skip) or by Consumer.Skip: the record is in the dead-letter topic
// (dead reason skipped; Consumer.Skip's copy has every failure it saw)
// and A's later record follows, in order.
func TestRetryConsumerStrictExhaustedStaysPaused(t *testing.T) {
	for _, order := range []string{queue.OrderPerKeyStrict, queue.OrderPerPartitionStrict} {
		for _, via := range []string{"keys:skip", "Consumer.Skip"} {
			t.Run(order+"/"+via, func(t *testing.T) { testStrictExhausted(t, order, via) })
		}
	}
}

func testStrictExhausted(t *testing.T, order, via string) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": order,
		"retry.backoff.ms": "200", "retry.jitter": "0", "retry.max.attempts": "3"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "B1")
	c := newStrictConsumer(t, ctx, b, "shippers", "orders")
	defer c.Close()
	w := newStrictWorker(t, c, func(r *kgo.Record, _ int) (string, bool) {
		return queue.ClassTransient, string(r.Value) == "A0"
	})
	perKey := order == queue.OrderPerKeyStrict
	w.until(ctx, "A0's last attempt", func() bool { return len(w.nacks) == 3 && (!perKey || slices.Contains(w.log, "B1")) })
	for i, n := range w.nacks[:2] {
		if n.Outcome != queue.Retry || !n.Paused || n.Due.IsZero() {
			t.Fatalf("nack %d: %+v", i+1, n)
		}
	}
	last := w.nacks[2]
	if last.Outcome != queue.Paused || !last.Paused || !last.Due.IsZero() || last.Topic != "orders" || last.Offset != 0 ||
		last.Meta.Attempt != 3 || last.Meta.DeadReason != "exhausted" {
		t.Fatalf("last nack: %+v", last)
	}
	// Nothing of A (of the partition, on per-partition-strict) for 2 s
	// after a fourth attempt would have been due.
	for until := w.at["A0"][2].Add(200*time.Millisecond + 2*time.Second); time.Now().Before(until); {
		w.poll(ctx, 300*time.Millisecond)
	}
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0!", "A0!"}) {
		t.Fatalf("key A during its pause: %v", got)
	}
	if got := ofKey(w.log, "B"); (perKey && !slices.Equal(got, []string{"B0", "B1"})) || (!perKey && len(got) != 0) {
		t.Fatalf("key B during A's pause: %v", got)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	st := durableState(t, ctx, admin, "shippers", "orders")
	if st.Committed != 0 || len(st.Pauses) != 1 || st.Pauses[0].First != 0 || st.Pauses[0].Attempts != 0 ||
		!st.Pauses[0].Due.IsZero() || st.Pauses[0].Class != queue.ClassTransient {
		t.Fatalf("durable state during the pause: %+v", st)
	}
	if ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, "orders.dlq"); err == nil {
		if o, ok := ends.Lookup("orders.dlq", 0); ok && o.Err == nil && o.Offset > 0 {
			t.Fatalf("the dead-letter topic has %d records before the skip", o.Offset)
		}
	}

	if via == "keys:skip" {
		req := `{"topic":"orders","partition":0,"message_key":"A"}`
		if !perKey {
			req = `{"topic":"orders","partition":0}`
		}
		code, body := postJSON(t, "http://"+b.Cfg.HTTPListen+"/v1/groups/shippers/keys:skip", req)
		if code != http.StatusOK || body["status"] != "skipped" || body["to_topic"] != "orders.dlq" {
			t.Fatalf("keys:skip: %d %v", code, body)
		}
	} else {
		res, err := c.Skip(ctx, "orders", 0, []byte("A"))
		if err != nil || res.Outcome != queue.DeadLetter || res.Topic != "orders.dlq" {
			t.Fatalf("Skip: %+v %v", res, err)
		}
		if _, err := c.Skip(ctx, "orders", 0, []byte("A")); !errors.Is(err, retry.ErrNotPaused) {
			t.Fatalf("a second Skip: %v", err)
		}
	}
	w.until(ctx, "A1 after the skip", func() bool { return slices.Contains(w.log, "A1") && slices.Contains(w.log, "B1") })
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0!", "A0!", "A1"}) {
		t.Fatalf("key A processed as %v", got)
	}
	if !perKey && !slices.Equal(w.log, []string{"A0!", "A0!", "A0!", "B0", "A1", "B1"}) {
		t.Fatalf("the partition processed as %v: a record passed the failed one", w.log)
	}
	dlq := testClient(t, b, kgo.ConsumeTopics("orders.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := dlq.PollFetches(ctx)
	var dead []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { dead = append(dead, r) })
	if len(dead) != 1 || string(dead[0].Value) != "A0" || string(dead[0].Key) != "A" {
		t.Fatalf("dead letters %v (%v)", dead, fs.Errors())
	}
	m, ok, err := queue.Parse(recordHeaders(dead[0]))
	if !ok || err != nil || m.DeadReason != queue.DeadReasonSkipped || m.SourceTopic != "orders" || m.SourceOffset != 0 || m.Group != "shippers" {
		t.Fatalf("dead letter headers %+v %v %v", m, ok, err)
	}
	if via == "Consumer.Skip" && (m.Attempt != 3 || len(m.History) != 3 || m.History[0].Error != "fail A0 #1" || m.History[2].Error != "fail A0 #3") {
		t.Fatalf("Consumer.Skip's dead letter history %+v", m)
	}
	if id := headerOf(dead[0], httpapi.MessageIDHeader); id != "id-A0" {
		t.Fatalf("dead letter message_id %q", id)
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "shippers", "orders")
		return st.Committed == 4 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
}

// TestRetryConsumerStrictPermanentPausesAtOnce: a permanent failure on
// its first delivery pauses key A with no due time at once (no retry, no
// dead letter) while B flows; Consumer.Resume lifts it: A0 comes again as
// attempt 1, then A1.
func TestRetryConsumerStrictPermanentPausesAtOnce(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": "per-key-strict",
		"retry.backoff.ms": "200", "retry.jitter": "0", "retry.max.attempts": "5"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "B1")
	c := newStrictConsumer(t, ctx, b, "shippers", "orders")
	defer c.Close()
	var attempts []int // Attempt of each delivery of A0
	w := newStrictWorker(t, c, func(r *kgo.Record, n int) (string, bool) {
		if string(r.Value) == "A0" {
			attempts = append(attempts, c.Attempt(r))
		}
		return queue.ClassPermanent, string(r.Value) == "A0" && n == 1
	})
	w.until(ctx, "the nack and B's records", func() bool { return len(w.nacks) == 1 && slices.Contains(w.log, "B1") })
	n := w.nacks[0]
	if n.Outcome != queue.Paused || !n.Paused || !n.Due.IsZero() || n.Offset != 0 || n.Meta.Attempt != 1 || n.Meta.DeadReason != "permanent" {
		t.Fatalf("nack: %+v", n)
	}
	for until := time.Now().Add(1500 * time.Millisecond); time.Now().Before(until); {
		w.poll(ctx, 300*time.Millisecond)
	}
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!"}) {
		t.Fatalf("key A during its pause: %v", got)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	st := durableState(t, ctx, admin, "shippers", "orders")
	if st.Committed != 0 || len(st.Pauses) != 1 || st.Pauses[0].Attempts != 0 || st.Pauses[0].Class != queue.ClassPermanent {
		t.Fatalf("durable state during the pause: %+v", st)
	}
	if err := c.Resume("orders", 0, []byte("B")); !errors.Is(err, retry.ErrNotPaused) {
		t.Fatalf("Resume of an unpaused key: %v", err)
	}
	if err := c.Resume("orders", 0, []byte("A")); err != nil {
		t.Fatal(err)
	}
	w.resumed = true
	w.until(ctx, "A's records after Resume", func() bool { return slices.Contains(w.log, "A1") })
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0", "A1"}) || !slices.Equal(attempts, []int{1, 1}) {
		t.Fatalf("key A after Resume: %v, attempts %v", got, attempts)
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "shippers", "orders")
		return st.Committed == 4 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
	if ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, "orders.dlq"); err == nil {
		if o, ok := ends.Lookup("orders.dlq", 0); ok && o.Err == nil && o.Offset > 0 {
			t.Fatalf("the dead-letter topic has %d records", o.Offset)
		}
	}
}

func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestRetryConsumerStrictLiftedOverHTTP: keys:resume and keys:skip work on
// a Kafka group using the helper, because they change the group's commit
// metadata: the consumer sees the pause gone within StrictSyncInterval.
// After keys:resume the failed record comes again from the source (before
// its own due time) followed by its key's later records in order; after
// keys:skip it is in the dead-letter topic (dead reason skipped) and only
// the key's later records come.
func TestRetryConsumerStrictLiftedOverHTTP(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	base := "http://" + b.Cfg.HTTPListen
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": "per-key-strict",
		"retry.backoff.ms": "600000", "retry.max.attempts": "5"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "C0", "C1")
	c := newStrictConsumer(t, ctx, b, "shippers", "orders")
	defer c.Close()
	failing := map[string]bool{"A0": true, "C0": true}
	w := newStrictWorker(t, c, func(r *kgo.Record, _ int) (string, bool) {
		return queue.ClassTransient, failing[string(r.Value)]
	})
	w.until(ctx, "both keys paused", func() bool { return len(w.nacks) == 2 && slices.Contains(w.log, "B0") })
	delete(failing, "A0")
	delete(failing, "C0")
	w.resumed = true

	code, body := postJSON(t, base+"/v1/groups/shippers/keys:resume", `{"topic":"orders","partition":0,"message_key":"A"}`)
	if code != http.StatusOK || body["status"] != "resumed" {
		t.Fatalf("keys:resume: %d %v", code, body)
	}
	w.until(ctx, "A's records after keys:resume", func() bool { return slices.Contains(w.log, "A1") })
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0", "A1"}) {
		t.Fatalf("key A after keys:resume: %v", got)
	}
	code, body = postJSON(t, base+"/v1/groups/shippers/keys:skip", `{"topic":"orders","partition":0,"message_key":"C"}`)
	if code != http.StatusOK || body["status"] != "skipped" || body["to_topic"] != "orders.dlq" {
		t.Fatalf("keys:skip: %d %v", code, body)
	}
	w.until(ctx, "C's records after keys:skip", func() bool { return slices.Contains(w.log, "C1") })
	if got := ofKey(w.log, "C"); !slices.Equal(got, []string{"C0!", "C1"}) {
		t.Fatalf("key C after keys:skip: %v", got)
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "shippers", "orders")
		return st.Committed == 5 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
}

// TestRetryConsumerStrictPartitionRestart: on a per-partition-strict
// topic a restart during the pause keeps it (the whole partition's scope,
// attempt 1, in the commit metadata): the restarted consumer reads the
// failed record again but hands out nothing of the partition before its
// due time, then the failed record, then the rest in offset order.
func TestRetryConsumerStrictPartitionRestart(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "ledger", 1, map[string]string{"delivery.order": "per-partition-strict",
		"retry.backoff.ms": "1500", "retry.jitter": "0", "retry.max.attempts": "3"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "ledger", "A0", "B0", "A1", "B1")
	fails := func(r *kgo.Record, n int) (string, bool) {
		return queue.ClassTransient, string(r.Value) == "A0" && n == 1
	}
	c1 := newStrictConsumer(t, ctx, b, "tellers", "ledger")
	w := newStrictWorker(t, c1, fails)
	w.until(ctx, "the first failure", func() bool { return len(w.nacks) == 1 })
	if err := c1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	st := durableState(t, ctx, admin, "tellers", "ledger")
	if st.Committed != 0 || len(st.Pauses) != 1 || st.Pauses[0].Scope != "" || st.Pauses[0].Attempts != 1 {
		t.Fatalf("durable state during the pause: %+v", st)
	}
	c2 := newStrictConsumer(t, ctx, b, "tellers", "ledger")
	defer c2.Close()
	w.c = c2
	w.until(ctx, "the partition after A0", func() bool { return slices.Contains(w.log, "B1") })
	if !slices.Equal(w.log, []string{"A0!", "A0", "B0", "A1", "B1"}) {
		t.Fatalf("the partition processed as %v", w.log)
	}
	if due := w.nacks[0].Due; w.at["A0"][1].Before(due) {
		t.Fatalf("A0 again at %v, before its due time %v", w.at["A0"][1], due)
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "tellers", "ledger")
		return st.Committed == 4 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
}

// TestRetryConsumerStrictExhaustedSurvivesRestart: a key paused after its
// last attempt stays paused in a restarted consumer (the pause is in the
// commit metadata, without a due time): nothing of the key comes, and
// Consumer.Skip of the new consumer writes the dead letter (its history
// names the failure as before a restart) and lets the key's later record
// through.
func TestRetryConsumerStrictExhaustedSurvivesRestart(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": "per-key-strict",
		"retry.backoff.ms": "200", "retry.jitter": "0", "retry.max.attempts": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "B1")
	c1 := newStrictConsumer(t, ctx, b, "shippers", "orders")
	w := newStrictWorker(t, c1, func(r *kgo.Record, _ int) (string, bool) {
		return queue.ClassTransient, string(r.Value) == "A0"
	})
	w.until(ctx, "A0's last attempt", func() bool { return len(w.nacks) == 2 && slices.Contains(w.log, "B1") })
	if n := w.nacks[1]; n.Outcome != queue.Paused || n.Meta.DeadReason != "exhausted" {
		t.Fatalf("last nack %+v", n)
	}
	if err := c1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()

	c2 := newStrictConsumer(t, ctx, b, "shippers", "orders")
	defer c2.Close()
	w.c = c2
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); {
		w.poll(ctx, 300*time.Millisecond)
	}
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0!"}) {
		t.Fatalf("key A after the restart: %v", got)
	}
	if w.count["A0"] != 2 || w.count["A1"] != 0 || w.count["B0"] != 1 || w.count["B1"] != 1 {
		t.Fatalf("deliveries after the restart: %v", w.count)
	}
	res, err := c2.Skip(ctx, "orders", 0, []byte("A"))
	if err != nil || res.Outcome != queue.DeadLetter || res.Topic != "orders.dlq" || res.Meta.Attempt != 1 ||
		!strings.Contains(res.Meta.History[0].Error, "restart") || res.Meta.DeadReason != queue.DeadReasonSkipped {
		t.Fatalf("Skip: %+v %v", res, err)
	}
	w.until(ctx, "A1 after the skip", func() bool { return slices.Contains(w.log, "A1") })
	if got := ofKey(w.log, "A"); !slices.Equal(got, []string{"A0!", "A0!", "A1"}) {
		t.Fatalf("key A processed as %v", got)
	}
	eventuallyTrue(t, "the commit reaches the log end with no pause", func() (bool, string) {
		w.poll(ctx, 200*time.Millisecond)
		st := durableState(t, ctx, admin, "shippers", "orders")
		return st.Committed == 4 && len(st.Pauses) == 0, fmt.Sprintf("%+v", st)
	})
}
