package runner

// faults_noisy.go owns the noisy-tenant family: a second tenant, with a
// produce quota, writes beside the workload (the default tenant's
// anonymous clients) and bursts to ten times its quota for a few seconds at
// a time. The run then checks the two promises of quotas and fair
// scheduling: the noisy tenant's acknowledged bytes stay within its quota
// (±10% and one burst window), and the quiet workload's acknowledged sends
// per second during each burst stay above a floor of what they were
// between bursts.
//
// Invariant: the noisy producer never blocks the run: it offers records
// with TryProduce, so a throttled client's full buffer drops the offer
// (counted), never the schedule.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	noisyTenant   = "noisy"
	noisyUser     = "noisy-producer"
	noisyPassword = "noisy-secret"
	noisyTopic    = "noisy"
	// noisyQuota is the tenant's producer_byte_rate, cluster-wide.
	noisyQuota      = 256 << 10
	noisyValueBytes = 1024
	// noisyBurstFactor is how far above its quota a burst offers.
	noisyBurstFactor = 10
	noisyBurst       = 6 * time.Second
	// noisyQuietFloor is the fraction of its between-bursts ack rate the
	// quiet workload keeps during a burst.
	noisyQuietFloor = 0.7
	// noisyTolerance is the quota's allowed error over the run.
	noisyTolerance = 0.10
)

// noisyState is the noisy tenant's producer and the samples of the run.
type noisyState struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	rate   atomic.Int64 // records offered per second now
	acked  atomic.Int64 // bytes acknowledged
	offers atomic.Int64 // records offered
	drops  atomic.Int64 // offers the client's full buffer refused
	start  time.Time
	// throttle: the end of the longest throttle a broker has imposed so
	// far (KIP-219: the request is answered, then its connection waits).
	throttle *throttleEnd

	mu      sync.Mutex
	bursts  [][2]time.Time // guarded by mu
	samples []ackSample    // guarded by mu: the quiet workload's acks, once a second
}

type ackSample struct {
	at    time.Time
	acked int64
}

// noisyBurst raises the noisy tenant's offered rate to ten times its
// quota for noisyBurst, then lowers it back to half its quota.
func (e *faultEnv) noisyBurst(ctx context.Context) error {
	if err := e.startNoisy(ctx); err != nil {
		return err
	}
	n := e.noisy
	f := e.start("noisy-tenant", "tenant "+noisyTenant, map[string]string{
		"quota_bytes_per_s": strconv.Itoa(noisyQuota), "factor": strconv.Itoa(noisyBurstFactor)})
	from := time.Now()
	n.rate.Store(noisyBurstFactor * noisyQuota / noisyValueBytes)
	sleep(ctx, noisyBurst)
	n.rate.Store(noisyQuota / 2 / noisyValueBytes)
	n.mu.Lock()
	n.bursts = append(n.bursts, [2]time.Time{from, time.Now()})
	n.mu.Unlock()
	e.stop(f)
	return nil
}

// startNoisy makes the tenant, its user, quota and topic, and starts its
// producer and the sampler of the quiet workload, once.
func (e *faultEnv) startNoisy(ctx context.Context) error {
	if e.noisy != nil {
		return nil
	}
	const conflict = 409 // made by an earlier attempt: fine
	steps := []struct{ method, path, body string }{
		{"POST", "/v1/tenants", `{"name":"` + noisyTenant + `"}`},
		{"POST", "/v1/users", `{"name":"` + noisyUser + `","tenant":"` + noisyTenant + `","password":"` + noisyPassword + `"}`},
		{"PUT", "/v1/tenants/" + noisyTenant + "/quotas", `{"set":{"producer_byte_rate":` + strconv.Itoa(noisyQuota) + `}}`},
	}
	for _, s := range steps {
		if err := e.c.Admin(ctx, s.method, s.path, s.body, conflict); err != nil {
			return fmt.Errorf("runner: noisy tenant: %w", err)
		}
	}
	throttle := &throttleEnd{}
	cl, err := newNoisyClient(e.c.SASLBootstrap(), kgo.WithHooks(throttle))
	if err != nil {
		return err
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, noisyTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		cl.Close()
		return fmt.Errorf("runner: create %s: %w", noisyTopic, err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n := &noisyState{cl: cl, cancel: cancel, start: time.Now(), throttle: throttle}
	n.rate.Store(noisyQuota / 2 / noisyValueBytes)
	e.noisy = n
	n.wg.Add(2)
	go n.produce(pctx)
	go n.sample(pctx, e)
	return nil
}

// newNoisyClient is the noisy tenant's producer. Its batches go
// uncompressed: the broker charges producer_byte_rate with the bytes of the
// request, as Kafka does, and franz-go's default (snappy) would shrink the
// run's 1 KiB values to a few dozen bytes on the wire, so the tenant's
// acknowledged value bytes would be many times its quota while the broker
// rightly measured it under. Uncompressed, the wire bytes are at least the
// value bytes, and the judgement of stopNoisy is sound.
func newNoisyClient(seeds []string, opts ...kgo.Opt) (*kgo.Client, error) {
	mech := scram.Auth{User: noisyUser, Pass: noisyPassword}.AsSha512Mechanism()
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.SASL(mech),
		kgo.DefaultProduceTopic(noisyTopic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(4096)}, opts...)...)
}

// throttleEnd is a kgo hook that keeps when the longest throttle the
// brokers imposed ends (unix ns).
type throttleEnd struct{ until atomic.Int64 }

func (h *throttleEnd) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	end := time.Now().Add(d).UnixNano()
	for {
		cur := h.until.Load()
		if end <= cur || h.until.CompareAndSwap(cur, end) {
			return
		}
	}
}

// runFor is how long the run took by the quota's own clock: until now, or
// until the end of a throttle still being served. A broker answers a
// request over the quota and then holds the connection for the debt
// (KIP-219), so the bytes of the last answers are paid for by a wait that
// may end after the run stops.
func (n *noisyState) runFor(now time.Time) time.Duration {
	end := now
	if u := time.Unix(0, n.throttle.until.Load()); u.After(end) {
		end = u
	}
	return end.Sub(n.start)
}

// produce offers rate records a second, in ticks of 10 ms.
func (n *noisyState) produce(ctx context.Context) {
	defer n.wg.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	value := make([]byte, noisyValueBytes)
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		owed += float64(n.rate.Load()) / 100
		for ; owed >= 1; owed-- {
			n.offers.Add(1)
			n.cl.TryProduce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					n.acked.Add(int64(len(r.Value)))
				} else if errors.Is(err, kgo.ErrMaxBuffered) {
					n.drops.Add(1)
				}
			})
		}
	}
}

// sample records the quiet workload's acknowledged sends once a second.
func (n *noisyState) sample(ctx context.Context, e *faultEnv) {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s := ackSample{at: now, acked: e.w.Stats().SendsOK}
			n.mu.Lock()
			n.samples = append(n.samples, s)
			n.mu.Unlock()
		}
	}
}

// stopNoisy stops the noisy producer and judges the run: what it finds
// wrong is returned, one line each.
func (e *faultEnv) stopNoisy() []string {
	n := e.noisy
	if n == nil {
		return nil
	}
	elapsed := n.runFor(time.Now())
	n.cancel()
	n.wg.Wait()
	n.cl.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	var bad []string
	// The quota: what the cluster accepted over the run, against the
	// quota plus one burst window (the bucket starts full).
	acked := float64(n.acked.Load())
	allowed := (1+noisyTolerance)*noisyQuota*elapsed.Seconds() + noisyQuota
	e.log.Info().Float64("acked_bytes_per_s", acked/elapsed.Seconds()).Int("quota", noisyQuota).
		Int64("offered", n.offers.Load()).Int64("dropped_full_buffer", n.drops.Load()).Msg("noisy tenant")
	if acked > allowed {
		bad = append(bad, fmt.Sprintf("noisy tenant: %.0f bytes acknowledged in %v (%.0f B/s), over its quota of %d B/s +%.0f%%",
			acked, elapsed.Round(time.Second), acked/elapsed.Seconds(), noisyQuota, 100*noisyTolerance))
	}
	bad = append(bad, judgeQuiet(n.samples, n.bursts)...)
	return bad
}

// judgeQuiet compares the quiet workload's ack rate during each burst with
// the median of its per-second rates between bursts.
func judgeQuiet(samples []ackSample, bursts [][2]time.Time) []string {
	in := func(t time.Time) int {
		for i, b := range bursts {
			if !t.Before(b[0]) && !t.After(b[1]) {
				return i
			}
		}
		return -1
	}
	var calm []float64
	during := make([][2]float64, len(bursts)) // acked, seconds
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		secs := b.at.Sub(a.at).Seconds()
		rate := float64(b.acked-a.acked) / secs
		ia, ib := in(a.at), in(b.at)
		switch {
		case ia < 0 && ib < 0:
			calm = append(calm, rate)
		case ia >= 0 && ia == ib:
			during[ia][0] += float64(b.acked - a.acked)
			during[ia][1] += secs
		}
	}
	if len(calm) < 3 {
		return nil // too short a run to have a baseline
	}
	slices.Sort(calm)
	base := calm[len(calm)/2]
	var bad []string
	for i, d := range during {
		if d[1] < 1 {
			continue
		}
		if rate := d[0] / d[1]; rate < noisyQuietFloor*base {
			bad = append(bad, fmt.Sprintf("quiet workload: %.0f acknowledged sends/s during noisy burst %d, below %.0f%% of its %.0f/s between bursts",
				rate, i+1, 100*noisyQuietFloor, base))
		}
	}
	return bad
}
