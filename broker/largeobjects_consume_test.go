package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/payload/consume"
)

// TestLargePayloadConsumeGatesCommit: payload/consume against a real
// broker on versitygw. Records: an inline one, an envelope whose object
// has one byte corrupted in the bucket, another inline one. The handler
// sees ErrChecksum again and again (with backoff); the group's committed
// offset reaches 1 (past the first record) and never passes the envelope,
// and the third record is not handled. With the byte restored, the
// envelope and the third record are handled, in order, and 3 is committed.
func TestLargePayloadConsumeGatesCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker, an S3 server and a consumer group against a broker and an S3 server")
	}
	b, base := startLargeObjectBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cl := testClient(t, b)
	pc := &payload.Client{Base: base}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const size = int64(256<<10 + 3)
	pc.SHA256 = genSHA(31, size)
	r, err := pc.Put(ctx, cl, "big", []byte("k"), newGen(31, size), size)
	if err != nil {
		t.Fatalf("payload.Put: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte("third")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	key := objectKeyOf(ctx, t, b, r.ID)
	good := genSlice(31, 0, size)
	bad := append([]byte(nil), good...)
	bad[size/3] ^= 0x5a
	if err := b.Objects.Put(ctx, key, bad); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var handled []string // "first", "env", "third", in handling order
	var checksumErrs, attempts int
	changed := make(chan struct{}, 1)
	note := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	h := func(_ context.Context, rec *kgo.Record, body io.Reader) error {
		got, err := io.ReadAll(body)
		mu.Lock()
		defer mu.Unlock()
		defer note()
		if errors.Is(err, payload.ErrChecksum) {
			checksumErrs++
		}
		if err != nil {
			return err
		}
		name := string(got)
		if int64(len(got)) == size {
			name = "env"
		}
		handled = append(handled, name)
		return nil
	}
	c, err := consume.New(consume.Config{Group: "g-gate", Topics: []string{"big"}, Payload: &payload.Client{Base: base},
		Handler: h, Backoff: func(int) time.Duration { return 50 * time.Millisecond }, CommitInterval: 100 * time.Millisecond,
		OnError: func(_ *kgo.Record, attempt int, _ error) {
			mu.Lock()
			attempts = max(attempts, attempt)
			mu.Unlock()
			note()
		}},
		kgo.SeedBrokers(b.KafkaAddr()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		<-done
		c.Close()
		t.Logf("%v: closed", time.Since(start))
	}()

	adm := kadm.NewClient(cl)
	committed := func() int64 {
		os, err := adm.FetchOffsets(ctx, "g-gate")
		if err != nil {
			return -2
		}
		o, ok := os.Lookup("big", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		defer func() { t.Logf("%v: %s", time.Since(start), what) }()
		deadline := time.After(60 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-deadline:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("waited 60 s for %s: handled %v, %d checksum errors, %d attempts, committed %d", what, handled, checksumErrs, attempts, committed())
			case <-changed:
			case <-tick.C:
			}
		}
	}
	// The corrupted envelope fails again and again; the first record is
	// committed, nothing past the envelope is.
	waitFor("three failed attempts and offset 1 committed", func() bool {
		mu.Lock()
		n := attempts
		mu.Unlock()
		return n >= 3 && committed() == 1
	})
	waitFor("two more failed attempts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return attempts >= 5
	})
	mu.Lock()
	if checksumErrs < 5 || len(handled) != 1 || handled[0] != "first" {
		t.Fatalf("while the object is corrupt: handled %v, %d checksum errors; want [first] and at least 5", handled, checksumErrs)
	}
	mu.Unlock()
	if got := committed(); got != 1 {
		t.Fatalf("committed offset %d while the envelope at 1 fails; want 1", got)
	}

	// Restored: the envelope and then the third record go through.
	if err := b.Objects.Put(ctx, key, good); err != nil {
		t.Fatal(err)
	}
	waitFor("offset 3 committed", func() bool { return committed() == 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 3 || handled[0] != "first" || handled[1] != "env" || handled[2] != "third" {
		t.Fatalf("handled %v, want [first env third]", handled)
	}
}

// TestConsumeRunStoppedMidPollResumes: Run stopped while the handler is in
// the second of five polled records, then run again: the second record is
// handled again and nothing after it skipped. On the old code the client's
// position had moved past the poll, so the second Run never saw r1 to r4
// (handled [r0], the commit stuck at 1; a later record would have been
// committed past them). Found by the large-payloads chaos family.
func TestConsumeRunStoppedMidPollResumes(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl := testClient(t, b)
	createTopic(t, cl, "inline", 1, nil)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "inline", Value: []byte{'r', byte('0' + i)}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handled []string
	blocked := make(chan struct{})
	first := true
	h := func(hctx context.Context, rec *kgo.Record, body io.Reader) error {
		v, _ := io.ReadAll(body)
		mu.Lock()
		block := first && string(v) == "r1"
		if block {
			first = false
		}
		mu.Unlock()
		if block {
			close(blocked)
			<-hctx.Done()
			return hctx.Err()
		}
		mu.Lock()
		handled = append(handled, string(v))
		mu.Unlock()
		return nil
	}
	c, err := consume.New(consume.Config{Group: "g-stop", Topics: []string{"inline"}, Payload: &payload.Client{Base: "http://127.0.0.1:1"},
		Handler: h, CommitInterval: 100 * time.Millisecond},
		kgo.SeedBrokers(b.KafkaAddr()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run1, stop1 := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(run1) }()
	select {
	case <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the handler never reached r1")
	}
	stop1()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	run2, stop2 := context.WithCancel(ctx)
	go func() { done <- c.Run(run2) }()
	defer func() { stop2(); <-done }()
	adm := kadm.NewClient(cl)
	brokertest.EventuallyWhy(t, 60*time.Second, "offset 5 committed", func() (bool, string) {
		os, err := adm.FetchOffsets(ctx, "g-stop")
		o, ok := os.Lookup("inline", 0)
		mu.Lock()
		defer mu.Unlock()
		return err == nil && ok && o.At == 5, fmt.Sprintf("committed %+v (%v); handled %v", o, err, handled)
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(handled, ",") != "r0,r1,r2,r3,r4" {
		t.Fatalf("handled %v, want r0 to r4 in order", handled)
	}
}
