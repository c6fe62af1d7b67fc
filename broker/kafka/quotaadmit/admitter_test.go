package quotaadmit

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBatchRecords(t *testing.T) {
	one := testBatch(t, 3)
	two := append(append([]byte{}, one...), testBatch(t, 5)...)
	for _, c := range []struct {
		name string
		raw  []byte
		want int
	}{
		{"none", nil, 0},
		{"one batch", one, 3},
		{"two batches", two, 8},
		{"cut short", two[:len(one)+20], 3},
		{"a header only", one[:61], 3},
	} {
		if got := batchRecords(c.raw); got != c.want {
			t.Errorf("%s: %d records, want %d", c.name, got, c.want)
		}
	}
}

// FuzzBatchRecords: no bytes (a produce request's records, from outside)
// panic the header walk or count below zero.
func FuzzBatchRecords(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if n := batchRecords(raw); n < 0 {
			t.Fatalf("%d records", n)
		}
	})
}

func testBatch(t *testing.T, n int) []byte {
	t.Helper()
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("v")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return raw
}

// TestQuotaAdmitterFetch: a fetch of a tenant in debt on consumer_byte_rate
// is answered at once with no records and the hold; otherwise its
// max_bytes is capped at a tenth of a second of the rate (FetchSlice), and
// the response's record bytes are charged.
func TestQuotaAdmitterFetch(t *testing.T) {
	m := quota.NewMeters(quota.Static{"acme": {quota.ConsumerByteRate: 1000}}, 0, nil)
	q := New(m)
	id := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}
	fetch := func() *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.SetVersion(11)
		r.MaxBytes = 50 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "in"
		ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, ft)
		return r
	}
	r := fetch()
	a, err := q.Admit(context.Background(), id, r)
	if err != nil || a.Answer != nil || a.Delay != 0 || r.MaxBytes != 100 {
		t.Fatalf("first fetch: %+v %v, max_bytes %d; want served with max_bytes 100 (a tenth of a second)", a, err, r.MaxBytes)
	}
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = testBatch(t, 3)
	rp.RecordBatches = append(rp.RecordBatches, make([]byte, 3000-len(rp.RecordBatches))...)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if h := q.Answered(id, r, resp); h.Delay != 2*time.Second || h.Reason != quota.ConsumerByteRate {
		t.Fatalf("3000 bytes at 1000/s with a 1000 burst: hold %+v, want 2s", h)
	}
	a, err = q.Admit(context.Background(), id, fetch())
	if err != nil || a.Delay <= 0 || a.Reason != quota.ConsumerByteRate {
		t.Fatalf("fetch in debt: %+v %v, want a hold", a, err)
	}
	empty, ok := a.Answer.(*kmsg.FetchResponse)
	if !ok || len(empty.Topics) != 0 || empty.ErrorCode != 0 || empty.GetVersion() != 11 {
		t.Fatalf("fetch in debt answered %+v, want an empty v11 fetch response", a.Answer)
	}
}

// TestHoldCappedDebtKept: with an injected clock, a produce far over its
// tenant's rate (50 s of debt per request) is held at most MaxHold, and
// so is each hold Owed answers after it; the debt is not forgiven: a
// client that sends its next produce as soon as the reader would read it
// (each hold, then Owed until 0) is held to the rate over ten minutes.
func TestHoldCappedDebtKept(t *testing.T) {
	const rate, size = 1000, 50_000 // bytes/s; bytes per produce
	m := quota.NewMeters(quota.Static{"acme": {quota.ProducerByteRate: rate}}, 0, nil)
	q := New(m)
	now := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return now }
	id := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}
	produce := func() kafka.Admission {
		r := kmsg.NewPtrProduceRequest()
		rt := kmsg.NewProduceRequestTopic()
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = make([]byte, size)
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		a, err := q.Admit(context.Background(), id, r)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	a := produce()
	if a.Delay != MaxHold || a.Reason != quota.ProducerByteRate {
		t.Fatalf("49 s of debt: hold %+v, want MaxHold (%v)", a.Hold, MaxHold)
	}
	now = now.Add(a.Delay)
	if d := q.Owed(id, quota.ProducerByteRate); d != MaxHold {
		t.Fatalf("39 s still owed after the first hold: Owed %v, want MaxHold", d)
	}
	now = now.Add(38 * time.Second)
	if d := q.Owed(id, quota.ProducerByteRate); d != time.Second {
		t.Fatalf("1 s still owed: Owed %v, want 1s", d)
	}
	now = now.Add(time.Second)
	if d := q.Owed(id, quota.ProducerByteRate); d != 0 {
		t.Fatalf("the debt paid: Owed %v, want 0", d)
	}

	start, sent := now, 0
	for now.Sub(start) < 10*time.Minute {
		a := produce()
		sent += size
		for d := a.Delay; d > 0; d = q.Owed(id, a.Reason) {
			if d > MaxHold {
				t.Fatalf("one hold of %v, over MaxHold", d)
			}
			now = now.Add(d)
		}
	}
	el := now.Sub(start).Seconds()
	if got, limit := float64(sent)/el, float64(rate)*1.01; got > limit {
		t.Fatalf("%d bytes in %.0f s: %.0f B/s over a quota of %d B/s", sent, el, got, rate)
	}
}
