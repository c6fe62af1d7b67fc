package kafka

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
)

// TestConnQuotaWait: the reader does not read while the connection is held
// or while it has its tenant's inflight_requests unanswered, and reads
// again once the hold passes or one is answered.
func TestConnQuotaWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cq := newConnQuota(AdmitAll{})
		cq.known, cq.limit = true, 1
		ready := make(chan error, 1)
		read := func() {
			go func() { ready <- cq.wait(context.Background()) }()
			synctest.Wait()
		}
		readable := func(want bool, what string) {
			t.Helper()
			select {
			case <-ready:
				if !want {
					t.Fatalf("%s: the reader read", what)
				}
			default:
				if want {
					t.Fatalf("%s: the reader is still held", what)
				}
			}
		}

		cq.sent()
		read()
		readable(false, "one request of one allowed in flight")
		cq.answeredOne(Hold{})
		synctest.Wait()
		readable(true, "after it was answered")

		cq.hold(Hold{Delay: 2 * time.Second, Reason: "producer_byte_rate"}, time.Now())
		read()
		readable(false, "held for 2s")
		time.Sleep(time.Second)
		synctest.Wait()
		readable(false, "1s into a 2s hold")
		time.Sleep(time.Second)
		synctest.Wait()
		readable(true, "after the hold")
	})
}

// TestConnQuotaAnswerSetsThrottle: the response of an admitted request
// carries what is left of its hold as throttle_time_ms; one that was not
// admitted (before authentication) carries none.
func TestConnQuotaAnswerSetsThrottle(t *testing.T) {
	cq := newConnQuota(AdmitAll{})
	req := &request{body: kmsg.NewPtrProduceRequest()}
	req.quota = reqQuota{conn: cq, admitted: true, hold: Hold{Delay: 1500 * time.Millisecond}, at: time.Now()}
	resp := kmsg.NewPtrProduceResponse()
	h := cq.answer(&outbound{req: req}, resp)
	if resp.ThrottleMillis < 1400 || resp.ThrottleMillis > 1500 || h.Delay <= 0 {
		t.Fatalf("throttle_time_ms %d, hold %v; want about 1500", resp.ThrottleMillis, h.Delay)
	}
	req.quota.admitted = false
	resp = kmsg.NewPtrProduceResponse()
	if h := cq.answer(&outbound{req: req}, resp); resp.ThrottleMillis != 0 || h.Delay != 0 {
		t.Fatalf("a request not admitted got throttle_time_ms %d", resp.ThrottleMillis)
	}
}

// owedAdmitter answers Owed from a list, one answer per call, then 0.
type owedAdmitter struct {
	AdmitAll
	owed    []time.Duration
	reasons []string
}

func (a *owedAdmitter) Owed(_ auth.Identity, reason string) time.Duration {
	a.reasons = append(a.reasons, reason)
	if len(a.owed) == 0 {
		return 0
	}
	d := a.owed[0]
	a.owed = a.owed[1:]
	return d
}

// TestConnQuotaHeldWhileOwed: when a (capped) hold ends the reader asks
// Owed for the debt of its reason and is held again, hold after hold,
// until nothing is owed; then it reads, and asks no more.
func TestConnQuotaHeldWhileOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		adm := &owedAdmitter{owed: []time.Duration{10 * time.Second, 3 * time.Second}}
		cq := newConnQuota(adm)
		cq.known = true
		start := time.Now()
		cq.hold(Hold{Delay: 10 * time.Second, Reason: "producer_byte_rate"}, start)
		ready := make(chan error, 1)
		go func() { ready <- cq.wait(context.Background()) }()
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != 23*time.Second {
			t.Fatalf("read after %v, want 23s: the 10s hold, then 10s and 3s owed", el)
		}
		if len(adm.reasons) != 3 || adm.reasons[0] != "producer_byte_rate" || adm.reasons[2] != "producer_byte_rate" {
			t.Fatalf("Owed asked %v, want three times for producer_byte_rate", adm.reasons)
		}
		if err := cq.wait(context.Background()); err != nil || len(adm.reasons) != 3 {
			t.Fatalf("a reader no longer held asked Owed again (%v) or failed: %v", adm.reasons, err)
		}
	})
}
