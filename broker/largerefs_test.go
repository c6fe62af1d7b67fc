package broker

// Retention of large payloads through the reference ledger (tier/doc.go,
// "Large objects"), on versitygw with a real broker and an injected clock.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// siteOf is partition n of topic (its internal name) as a claim names it.
func siteOf(t testing.TB, b *Broker, topic string, n int32) node.RefSite {
	t.Helper()
	tp := b.LookupTopic(topic)
	if tp == nil {
		t.Fatalf("no topic %q", topic)
	}
	return node.RefSite{TopicID: tp.Meta.ID, Topic: topic, Partition: n}
}

// beginOn opens an upload session for topic.
func beginOn(t *testing.T, base, topic string, size int64, sum string) upload {
	t.Helper()
	code, raw, _ := doHTTP(t, "POST", base+"/v1/uploads", strings.NewReader(fmt.Sprintf(
		`{"topic":%q,"size":%d,"sha256":%q}`, topic, size, sum)), -1, nil)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/uploads: %d %s", code, raw)
	}
	var u upload
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// refAt is one record naming an object: its topic and offset.
type refAt struct {
	topic  string
	offset int64
}

// TestLargeObjectRetentionThroughDays: on versitygw and a real broker, with
// the clock injected across 40 days, an object named by records is never
// deleted while any of them is at or above its partition's log start —
// its own record in a topic keeping 7 days, a dead-letter copy in a topic
// keeping 30 days, a redrive of that copy on day 25 — and once all are
// below the log starts and the grace has run, it goes, with its ledger
// entries; a claim of it is then refused. A session completed and never
// published goes at its TTL; one never completed is aborted.
func TestLargeObjectRetentionThroughDays(t *testing.T) {
	if testing.Short() {
		t.Skip("40 days of an injected clock on versitygw")
	}
	clock := &testClock{now: time.Now()}
	srv := s3test.Start(t)
	cfg := s3BrokerConfig(t, srv)
	cfg.ObjectStoreOptions.Timeout = time.Minute
	cfg.Now, cfg.TierGrace, cfg.UploadSweepInterval = clock.Now, time.Hour, 50*time.Millisecond
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	// Uncompressed, so that segments roll (4 KiB) about daily.
	cl := testClient(t, b, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	const day = 24 * time.Hour
	topicConfigs := func(retention time.Duration) map[string]string {
		c := map[string]string{"retention.ms": fmt.Sprint(retention.Milliseconds())}
		for k, v := range tieringConfigs {
			if k != "retention.ms" {
				c[k] = v
			}
		}
		return c
	}
	createTopic(t, cl, "orders", 1, topicConfigs(7*day))
	createTopic(t, cl, "orders-dlq", 1, topicConfigs(30*day))

	upload := func(seed uint64, size int64, complete bool) string {
		sum := genSHA(seed, size)
		u := beginOn(t, base, "orders", size, sum)
		if !complete {
			return u.ID
		}
		if err := putAll(t, base, u, seed, size, 1); err != nil {
			t.Fatal(err)
		}
		if code, out := completeUpload(t, base, u.ID); code != http.StatusOK {
			t.Fatalf("complete: %d %v", code, out)
		}
		return u.ID
	}
	const size = 3000
	refs := map[string]ref.Ref{}
	for i, name := range []string{"A", "B"} {
		id := upload(uint64(i+1), size, true)
		refs[name] = refOf(t, id, size, genSHA(uint64(i+1), size))
	}
	orphan := upload(3, size, true)
	stale := upload(4, size, false)
	keyOf := func(id string) string { return largeobj.ObjectKey("default", id) }
	exists := func(id string) bool {
		_, err := b.Objects.Head(ctx, keyOf(id))
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	produce := func(topic string, r *ref.Ref, n int) int64 {
		var rs []*kgo.Record
		for i := range n {
			rec := &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{'f'}, 400), Timestamp: clock.Now()}
			if r != nil && i == 0 {
				rec.Value, rec.Headers = []byte("preview"), envelopeHeaders(*r)
			}
			rs = append(rs, rec)
		}
		res := cl.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
		return res[0].Record.Offset
	}
	earliest := func(topic string) int64 {
		o, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := o.Lookup(topic, 0)
		if !ok || l.Err != nil {
			t.Fatalf("ListStartOffsets %s: %v (found %v)", topic, l.Err, ok)
		}
		return l.Offset
	}
	uploaded := func(topic string) {
		p, _ := b.PartitionOf(topic, 0)
		hw, _ := p.HighWatermark()
		eventuallyTrue(t, topic+" uploaded", func() (bool, string) {
			r := b.RemoteRange(ctx, p)
			return r.RemoteEnd == hw, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
		})
	}
	named := map[string][]refAt{}
	a, bb := refs["A"], refs["B"]
	named["A"] = append(named["A"], refAt{"orders", produce("orders", &a, 5)})
	named["B"] = append(named["B"], refAt{"orders", produce("orders", &bb, 5)})
	// safe checks, object first and log start after (the log start only
	// moves forward), that an object is there while a record names it.
	safe := func(d int) {
		t.Helper()
		for name, at := range named {
			if exists(refs[name].ID) {
				continue
			}
			for _, r := range at {
				if e := earliest(r.topic); r.offset >= e {
					t.Fatalf("day %d: object %s deleted while its record %s@%d is live (log start %d)", d, name, r.topic, r.offset, e)
				}
			}
		}
	}
	goneOn := map[string]int{}
	for d := 1; d <= 40; d++ {
		clock.Advance(day)
		switch d {
		case 1: // a consumer gives up on A: its dead-letter copy
			named["A"] = append(named["A"], refAt{"orders-dlq", produce("orders-dlq", &a, 5)})
		case 25: // an operator redrives the dead letter to orders
			named["A"] = append(named["A"], refAt{"orders", produce("orders", &a, 5)})
		default:
			produce("orders", nil, 5)
			produce("orders-dlq", nil, 5)
		}
		uploaded("orders")
		uploaded("orders-dlq")
		if testing.Verbose() {
			for name, r := range refs {
				rs, _, _ := b.Store.RefsOfObject(ctx, r.ID)
				u, _ := b.Store.GetUpload(ctx, r.ID)
				t.Logf("day %d: %s %s due %d, entries %+v, log starts %d %d", d, name, u.State, u.ReleaseDueMs, rs, earliest("orders"), earliest("orders-dlq"))
			}
		}
		safe(d)
		for name := range refs {
			if _, ok := goneOn[name]; !ok && !exists(refs[name].ID) {
				goneOn[name] = d
			}
		}
		switch d {
		case 1: // past the sessions' TTL (an hour)
			eventuallyTrue(t, "the orphan deleted and the stale session aborted", func() (bool, string) {
				u, err := b.Store.GetUpload(ctx, stale)
				if err != nil {
					t.Fatal(err)
				}
				return !exists(orphan) && u.State == meta.UploadAborted, fmt.Sprintf("orphan there %v, stale %s", exists(orphan), u.State)
			})
		case 31: // the dead letter (day 1) and the redrive (day 25) are live
			if !exists(a.ID) {
				t.Fatal("day 31: A deleted while its dead-letter copy and redrive are within retention")
			}
		}
	}
	// Segments roll about daily, so retention passes a day's records a
	// day or two after its 7 or 30 days; the grace is an hour.
	if g, ok := goneOn["B"]; !ok || g < 8 || g > 12 {
		t.Fatalf("B (one record, 7 days) gone on day %d (%v); want within days 8..12", g, ok)
	}
	if g, ok := goneOn["A"]; ok && g <= 31 {
		t.Fatalf("A gone on day %d, within its dead letter's retention", g)
	}
	// Day 40: every record naming A is below its log start; after the grace
	// (the clock moves on in small steps: the passes are asynchronous) it
	// goes, and its ledger entries with it.
	eventuallyTrue(t, "A deleted after the grace", func() (bool, string) {
		clock.Advance(10 * time.Minute)
		safe(40)
		rs, _, err := b.Store.RefsOfObject(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return !exists(a.ID) && len(rs) == 0, fmt.Sprintf("object there %v, %d entries", exists(a.ID), len(rs))
	})
	for _, r := range named["A"] {
		if e := earliest(r.topic); r.offset >= e {
			t.Fatalf("A's record %s@%d is still live (log start %d)", r.topic, r.offset, e)
		}
	}
	_, raw := httpGet(t, base+"/metrics")
	for _, want := range []string{`sluice_large_objects_deleted_total{reason="released"} 2`, `sluice_large_objects_deleted_total{reason="orphan"} 1`,
		"sluice_large_object_sessions_aborted_total 1", "sluice_large_object_orphans 0", "sluice_large_object_refs_dropped_total 4"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A claim of a deleted object is refused: the redrive comes too late.
	rec := &kgo.Record{Topic: "orders", Value: []byte("late"), Headers: envelopeHeaders(a)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce naming a deleted object: %v, want INVALID_RECORD", err)
	}
}
