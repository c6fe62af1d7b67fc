package broker

// The copies the broker writes itself (a nack's dead letter over HTTP, a
// redrive) hold their large object in the reference ledger like any
// publish (tier/doc.go, "Large objects").

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// TestLargeObjectBrokerCopiesHoldTheirObject: on versitygw and a real
// broker with an injected clock, an object whose record was nacked over
// HTTP into its DLQ outlives the source record (moved below the log start,
// settled, past the grace) while the dead letter lives, and is readable
// through it; an object whose dead letter was redriven outlives the dead
// letter while the redriven record lives. Objects named only by the
// deleted records (the witnesses) go meanwhile, so the retention passes
// and the release sweep did run.
func TestLargeObjectBrokerCopiesHoldTheirObject(t *testing.T) {
	if testing.Short() {
		t.Skip("hours of an injected clock on versitygw")
	}
	clock := &testClock{now: time.Now()}
	srv := s3test.Start(t)
	cfg := s3BrokerConfig(t, srv)
	cfg.ObjectStoreOptions.Timeout = time.Minute
	cfg.Now, cfg.TierGrace, cfg.UploadSweepInterval = clock.Now, time.Hour, 50*time.Millisecond
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	cl := testClient(t, b, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, "orders", 1, tieringConfigs)
	createTopic(t, cl, "orders.dlq", 1, tieringConfigs)

	const size = 3000
	objects := map[string]ref.Ref{}
	for i, name := range []string{"A", "B", "C", "D"} {
		seed := uint64(i + 1)
		sum := genSHA(seed, size)
		u := beginOn(t, base, "orders", size, sum)
		if err := putAll(t, base, u, seed, size, 1); err != nil {
			t.Fatal(err)
		}
		if code, out := completeUpload(t, base, u.ID); code != http.StatusOK {
			t.Fatalf("complete: %d %v", code, out)
		}
		objects[name] = refOf(t, u.ID, size, sum)
	}
	exists := func(name string) bool {
		_, err := b.Objects.Head(ctx, largeobj.ObjectKey("default", objects[name].ID))
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	publish := func(topic, name, key string) {
		t.Helper()
		r := objects[name]
		msg := fmt.Sprintf(`{"message_key":%q,"message_id":%q,"object_ref":{"ref":%q,"size":%d,"sha256":%q}}`, key, name, r.ID, r.Size, r.SHA256)
		if code, body := postJSON(t, base+"/v1/topics/"+topic+"/messages:publish", `{"messages":[`+msg+`]}`); code != http.StatusOK {
			t.Fatalf("publish %s to %s: %d %v", name, topic, code, body)
		}
	}
	// entryOn reports whether the ledger holds an entry of the object for
	// partition 0 of topic.
	entryOn := func(name, topic string) bool {
		rs, _, err := b.Store.RefsOfObject(ctx, objects[name].ID)
		if err != nil {
			t.Fatal(err)
		}
		id := b.LookupTopic(topic).Meta.ID
		for _, r := range rs {
			if r.TopicID == id && r.Partition == 0 {
				return true
			}
		}
		return false
	}
	deleteAll := func(topic string) {
		t.Helper()
		p, _ := b.PartitionOf(topic, 0)
		hw, _ := p.HighWatermark()
		// A client retries a retriable error (REQUEST_TIMED_OUT when etcd
		// is slow on a loaded machine), as this does, a few times.
		for attempt := 1; ; attempt++ {
			resp, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: int64(hw)}}})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := resp.Lookup(topic, 0)
			if r.Err == nil && r.LowWatermark == int64(hw) {
				return
			}
			if !kerr.IsRetriable(r.Err) || attempt == 3 {
				t.Fatalf("DeleteRecords %s to %d (attempt %d): %+v", topic, hw, attempt, r)
			}
			t.Logf("DeleteRecords %s to %d (attempt %d): %v; retrying", topic, hw, attempt, r.Err)
		}
	}
	// passUntil moves the clock on in steps of 10 minutes, each followed
	// by an upload of both topics (a retention pass of each) and the
	// deletion of every record of topic emptied (so the ledger entries
	// closed meanwhile fall below its log start), until the witness object
	// is deleted.
	passUntil := func(witness, emptied string) {
		t.Helper()
		brokertest.EventuallyWhy(t, 2*time.Minute, witness+" deleted", func() (bool, string) {
			clock.Advance(10 * time.Minute)
			for _, topic := range []string{"orders", "orders.dlq"} {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("filler"), Timestamp: clock.Now()}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				p, _ := b.PartitionOf(topic, 0)
				hw, _ := p.HighWatermark()
				eventuallyTrue(t, topic+" uploaded", func() (bool, string) {
					r := b.RemoteRange(ctx, p)
					return r.RemoteEnd == hw, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
				})
			}
			deleteAll(emptied)
			return !exists(witness), fmt.Sprintf("clock at +%v", time.Until(clock.Now()).Round(time.Minute))
		})
		time.Sleep(500 * time.Millisecond) // sweeps enough to delete any other object released with it
	}
	// readable reads the object named by the first record of topic from
	// offset from whose message_id is name, and checks its bytes.
	readable := func(topic string, from int64, name string) {
		t.Helper()
		rd := testClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var got *kgo.Record
		for got == nil {
			fs := rd.PollFetches(rctx)
			if rctx.Err() != nil {
				t.Fatalf("no record of %s read from %s@%d", name, topic, from)
			}
			fs.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if got == nil && h.Key == "message_id" && string(h.Value) == name {
						got = r
					}
				}
			})
		}
		hs := make([]ref.Header, len(got.Headers))
		for i, h := range got.Headers {
			hs[i] = ref.Header{Key: h.Key, Value: h.Value}
		}
		r, ok, err := ref.Parse(hs)
		if err != nil || !ok || r.ID != objects[name].ID {
			t.Fatalf("%s@%d: reference %+v (%v, %v), want %s's", topic, got.Offset, r, ok, err, name)
		}
		code, raw, _ := doHTTP(t, "GET", base+"/v1/objects/"+r.ID, nil, 0, nil)
		sum := sha256.Sum256(raw)
		if code != http.StatusOK || hex.EncodeToString(sum[:]) != r.SHA256 {
			t.Fatalf("GET the object of %s@%d: %d, %d bytes, sha256 %x; want %s", topic, got.Offset, code, len(raw), sum, r.SHA256)
		}
	}

	// A and B in orders; D's dead letter (key d) already in the DLQ, and
	// C (the second witness) there too.
	publish("orders", "A", "a")
	publish("orders", "B", "b")
	publish("orders.dlq", "D", "d")
	publish("orders.dlq", "C", "c")

	// A consumer fails A for good (its dead letter) and processes B.
	code, joined := postJSON(t, base+"/v1/groups/workers/members:join", `{"topics":["orders"]}`)
	if code != http.StatusOK {
		t.Fatalf("join: %d %v", code, joined)
	}
	member := fmt.Sprintf(`"member_id":%q,"generation":%d`, joined["member_id"], int(joined["generation"].(float64)))
	settled := map[string]queueResult{}
	for deadline := time.Now().Add(30 * time.Second); len(settled) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("timed out fetching A and B: %+v", settled)
		}
		var fetched struct{ Messages []queueMsg }
		if code := postInto(t, base+"/v1/groups/workers/messages:fetch", `{`+member+`,"wait_ms":500}`, &fetched); code != http.StatusOK {
			t.Fatalf("fetch: %d", code)
		}
		for _, m := range fetched.Messages {
			at := fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":%d`, m.Topic, m.Partition, m.Offset)
			var ans struct{ Results []queueResult }
			var code int
			if m.MessageID == "A" {
				code = postInto(t, base+"/v1/groups/workers/messages:nack", `{`+member+`,"nacks":[`+at+`,"error_class":"permanent","error":"unparseable"}]}`, &ans)
			} else {
				code = postInto(t, base+"/v1/groups/workers/messages:ack", `{`+member+`,"acks":[`+at+`}]}`, &ans)
			}
			if code != http.StatusOK || len(ans.Results) != 1 {
				t.Fatalf("settle %s: %d %+v", m.MessageID, code, ans)
			}
			settled[m.MessageID] = ans.Results[0]
		}
	}
	if r := settled["A"]; r.Status != "dead_letter" || r.ToTopic != "orders.dlq" {
		t.Fatalf("nack of A: %+v, want dead_letter to orders.dlq", r)
	}
	if !entryOn("A", "orders.dlq") {
		t.Errorf("the ledger holds no entry of A for orders.dlq after its dead letter was written there")
	}

	// A's and B's records in orders go below the log start; B goes once
	// the settle time and the grace have run. A stays: its dead letter
	// lives.
	passUntil("B", "orders")
	if !exists("A") {
		t.Errorf("A deleted while its dead letter in orders.dlq is live")
	} else {
		readable("orders.dlq", 0, "A")
	}

	// D's dead letter is redriven to orders; then every record of the DLQ
	// (and so C) goes below its log start. D stays: its redriven record in orders lives.
	start, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	redrivenFrom, _ := start.Lookup("orders", 0)
	v := startRedrive(t, base, "orders.dlq", `{"target":"orders","message_key":"d"}`)
	brokertest.EventuallyWhy(t, 30*time.Second, "the redrive done", func() (bool, string) {
		v = redriveView(t, base, v.ID)
		return v.State == "done" || v.State == "failed", fmt.Sprintf("%+v", v)
	})
	if v.State != "done" || v.Redriven != 1 {
		t.Fatalf("redrive of D: %+v, want done with 1 redriven", v)
	}
	if !entryOn("D", "orders") {
		t.Errorf("the ledger holds no entry of D for orders after its redrive was written there")
	}
	passUntil("C", "orders.dlq")
	if !exists("D") {
		t.Errorf("D deleted while its redriven record in orders is live")
	} else {
		readable("orders", redrivenFrom.Offset, "D")
	}
	if t.Failed() {
		return
	}
	// A's dead letter went with the DLQ: so did A.
	passUntil("A", "orders.dlq")
	if entryOn("A", "orders.dlq") {
		t.Fatal("A deleted with its ledger entry for orders.dlq left")
	}
}

// TestNackOfAnUnclaimableCopyKeepsTheRecord: when the reference of a
// nacked record can no longer be claimed (its object is gone), the nack
// answers an error naming the copy, writes no dead letter and commits
// nothing past the record, which stays outstanding; once the reference
// can be claimed again the same delivery is nacked into the DLQ.
func TestNackOfAnUnclaimableCopyKeepsTheRecord(t *testing.T) {
	r := testRef("gone1", 5<<20)
	claimer := newTestClaimer(testSession{tenant: "default", r: r})
	cfg := testBrokerConfig(t)
	cfg.Refs = claimer
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"jobs","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	msg := fmt.Sprintf(`{"message_id":"m1","object_ref":{"ref":%q,"size":%d,"sha256":%q}}`, r.ID, r.Size, r.SHA256)
	if code, body := postJSON(t, base+"/v1/topics/jobs/messages:publish", `{"messages":[`+msg+`]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, joined := postJSON(t, base+"/v1/groups/workers/members:join", `{"topics":["jobs"]}`)
	if code != http.StatusOK {
		t.Fatalf("join: %d %v", code, joined)
	}
	member := fmt.Sprintf(`"member_id":%q,"generation":%d`, joined["member_id"], int(joined["generation"].(float64)))
	var fetched struct{ Messages []queueMsg }
	for deadline := time.Now().Add(20 * time.Second); len(fetched.Messages) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("timed out fetching the record")
		}
		if code := postInto(t, base+"/v1/groups/workers/messages:fetch", `{`+member+`,"wait_ms":500}`, &fetched); code != http.StatusOK {
			t.Fatalf("fetch: %d", code)
		}
	}
	m := fetched.Messages[0]
	nack := fmt.Sprintf(`{%s,"nacks":[{"topic":%q,"partition":%d,"offset":%d,"error_class":"permanent","error":"bad"}]}`, member, m.Topic, m.Partition, m.Offset)
	type answer struct {
		Results   []queueResult
		Committed []struct{ Offset int64 }
	}

	claimer.mu.Lock()
	delete(claimer.sessions, r.ID) // the object is gone
	claimer.mu.Unlock()
	var ans answer
	if code := postInto(t, base+"/v1/groups/workers/messages:nack", nack, &ans); code != http.StatusOK || len(ans.Results) != 1 {
		t.Fatalf("nack: %d %+v", code, ans)
	}
	if res := ans.Results[0]; res.Status != "error" || !strings.Contains(res.Error, "the copy to jobs.dlq-0 is not written") ||
		!strings.Contains(res.Error, "unknown object reference") || len(ans.Committed) != 0 {
		t.Fatalf("nack of a record whose reference cannot be claimed: %+v, want an error naming the copy and no commit", ans)
	}
	dlq, err := b.PartitionOf("jobs.dlq", 0)
	if err != nil {
		t.Fatalf("jobs.dlq-0: %v", err)
	}
	if hw, _ := dlq.HighWatermark(); hw != 0 {
		t.Fatalf("jobs.dlq holds %d records after the refused copy", hw)
	}
	var lag struct{ Partitions []httpapi.PartitionLag }
	if code := getJSON(t, base+"/v1/groups/workers/lag", &lag); code != http.StatusOK {
		t.Fatalf("lag: %d", code)
	}
	for _, l := range lag.Partitions {
		if l.Topic == "jobs" && l.Committed > m.Offset {
			t.Fatalf("jobs-%d committed at %d, past the record at %d whose copy was not written", l.Partition, l.Committed, m.Offset)
		}
	}

	claimer.mu.Lock()
	claimer.sessions[r.ID] = testSession{tenant: "default", r: r}
	claimer.mu.Unlock()
	ans = answer{}
	if code := postInto(t, base+"/v1/groups/workers/messages:nack", nack, &ans); code != http.StatusOK || len(ans.Results) != 1 ||
		ans.Results[0].Status != "dead_letter" || len(ans.Committed) != 1 || ans.Committed[0].Offset != m.Offset+1 {
		t.Fatalf("nack again: %d %+v, want dead_letter and a commit past it", code, ans)
	}
}

// TestKeysSkipOfAnUnclaimableCopyKeepsThePause: on a per-key-strict topic,
// keys:skip of a paused record whose reference can no longer be claimed
// answers 400 INVALID_RECORD naming the copy, writes no dead letter and
// leaves the key paused; once the reference can be claimed the skip moves
// the record to the DLQ.
func TestKeysSkipOfAnUnclaimableCopyKeepsThePause(t *testing.T) {
	r := testRef("gone2", 5<<20)
	claimer := newTestClaimer(testSession{tenant: "default", r: r})
	cfg := testBrokerConfig(t)
	cfg.Refs = claimer
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"jobs","partitions":1,"configs":{"delivery.order":"per-key-strict"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	msg := fmt.Sprintf(`{"message_key":"K","message_id":"m1","object_ref":{"ref":%q,"size":%d,"sha256":%q}}`, r.ID, r.Size, r.SHA256)
	if code, body := postJSON(t, base+"/v1/topics/jobs/messages:publish", `{"messages":[`+msg+`]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, joined := postJSON(t, base+"/v1/groups/workers/members:join", `{"topics":["jobs"]}`)
	if code != http.StatusOK {
		t.Fatalf("join: %d %v", code, joined)
	}
	member := fmt.Sprintf(`"member_id":%q,"generation":%d`, joined["member_id"], int(joined["generation"].(float64)))
	var fetched struct{ Messages []queueMsg }
	for deadline := time.Now().Add(20 * time.Second); len(fetched.Messages) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("timed out fetching the record")
		}
		if code := postInto(t, base+"/v1/groups/workers/messages:fetch", `{`+member+`,"wait_ms":500}`, &fetched); code != http.StatusOK {
			t.Fatalf("fetch: %d", code)
		}
	}
	m := fetched.Messages[0]
	var ans struct{ Results []queueResult }
	nack := fmt.Sprintf(`{%s,"nacks":[{"topic":%q,"partition":%d,"offset":%d,"error_class":"permanent","error":"bad"}]}`, member, m.Topic, m.Partition, m.Offset)
	if code := postInto(t, base+"/v1/groups/workers/messages:nack", nack, &ans); code != http.StatusOK || len(ans.Results) != 1 || ans.Results[0].Status != "paused" {
		t.Fatalf("nack: %d %+v, want paused", code, ans)
	}

	claimer.mu.Lock()
	delete(claimer.sessions, r.ID) // the object is gone
	claimer.mu.Unlock()
	skip := `{"topic":"jobs","partition":0,"message_key":"K"}`
	code, body := postJSON(t, base+"/v1/groups/workers/keys:skip", skip)
	e, _ := body["error"].(map[string]any)
	if code != http.StatusBadRequest || e == nil || e["code"] != "INVALID_RECORD" ||
		!strings.Contains(fmt.Sprint(e["message"]), "the copy to jobs.dlq-0 is not written") {
		t.Fatalf("keys:skip of a record whose reference cannot be claimed: %d %v, want 400 INVALID_RECORD naming the copy", code, body)
	}
	if dlq, err := b.PartitionOf("jobs.dlq", 0); err != nil {
		t.Fatalf("jobs.dlq-0: %v", err)
	} else if hw, _ := dlq.HighWatermark(); hw != 0 {
		t.Fatalf("jobs.dlq holds %d records after the refused copy", hw)
	}
	var lag struct {
		Partitions []struct {
			Topic     string
			Committed int64
			Paused    []any
		}
	}
	if code := getJSON(t, base+"/v1/groups/workers/lag", &lag); code != http.StatusOK || len(lag.Partitions) != 1 ||
		len(lag.Partitions[0].Paused) != 1 || lag.Partitions[0].Committed > m.Offset {
		t.Fatalf("lag after the refused skip: %d %+v, want K still paused at %d", code, lag, m.Offset)
	}

	claimer.mu.Lock()
	claimer.sessions[r.ID] = testSession{tenant: "default", r: r}
	claimer.mu.Unlock()
	if code, body := postJSON(t, base+"/v1/groups/workers/keys:skip", skip); code != http.StatusOK || body["status"] != "skipped" || body["to_topic"] != "jobs.dlq" {
		t.Fatalf("keys:skip again: %d %v, want skipped to jobs.dlq", code, body)
	}
}
