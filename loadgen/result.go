package loadgen

// This file owns the Result of a run, its assembly from the collector, and
// the per-interval sampler that also prints the live progress line.

import (
	"fmt"
	"time"

	"context"
)

// Result is everything a run measured. Rates are per second, sizes in
// bytes (MB = 10^6 bytes), latencies in milliseconds.
type Result struct {
	System       string  `json:"system"`
	Label        string  `json:"label,omitempty"`
	Scenario     string  `json:"scenario"`
	Topic        string  `json:"topic"`
	TargetRate   float64 `json:"target_rate"` // 0: as fast as possible
	Producers    int     `json:"producers"`
	Consumers    int     `json:"consumers"`
	ConsumerMode string  `json:"consumer_mode,omitempty"`
	Partitions   int     `json:"partitions"`
	Sizes        string  `json:"sizes"`
	Keys         string  `json:"keys"`
	Acks         string  `json:"acks"`
	Idempotent   bool    `json:"idempotent"`
	LingerMs     float64 `json:"linger_ms"`
	BatchBytes   int     `json:"batch_bytes"`
	InFlight     int     `json:"in_flight"`

	ProduceSeconds float64          `json:"produce_seconds"` // first scheduled send to last acknowledgment
	Produced       Throughput       `json:"produced"`
	Consumed       Throughput       `json:"consumed"`
	AckLatency     Summary          `json:"ack_latency"`
	E2ELatency     Summary          `json:"e2e_latency"`
	FetchLatency   Summary          `json:"fetch_latency"` // consumers' Fetch round trips (kafka)
	Lag            LagResult        `json:"lag"`
	Errors         map[string]int64 `json:"errors"`
	Peak           *PeakResult      `json:"peak,omitempty"`
	Replay         *ReplayResult    `json:"replay,omitempty"`
	Crash          *CrashResult     `json:"crash,omitempty"`
	Series         []Sample         `json:"series"`
}

// Throughput counts records and bytes and their rates.
type Throughput struct {
	Records    int64   `json:"records"`
	Failed     int64   `json:"failed,omitempty"`
	Duplicates int64   `json:"duplicates,omitempty"`
	Bytes      int64   `json:"bytes"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
}

// LagResult is the consumer lag (records acknowledged or prefilled and not yet consumed).
type LagResult struct {
	Max            int64   `json:"max"`
	Final          int64   `json:"final"`
	CatchUpSeconds float64 `json:"catch_up_seconds"` // end of production until lag 0
	CaughtUp       bool    `json:"caught_up"`
}

// PeakResult is the peak scenario's drain measurement.
type PeakResult struct {
	SteadyRate     float64 `json:"steady_rate"`
	PeakRate       float64 `json:"peak_rate"`
	PeakSeconds    float64 `json:"peak_seconds"`
	MaxBacklog     int64   `json:"max_backlog"`
	DrainThreshold int64   `json:"drain_threshold"`
	DrainSeconds   float64 `json:"drain_seconds"` // end of peak until backlog <= threshold
	Drained        bool    `json:"drained"`
}

// ReplayResult is the replay scenario's prefill and catch-up.
type ReplayResult struct {
	Prefilled         int64   `json:"prefilled"`
	PrefillFailed     int64   `json:"prefill_failed,omitempty"`
	PrefillSeconds    float64 `json:"prefill_seconds"`
	PrefillMsgsPerSec float64 `json:"prefill_msgs_per_sec"`
	ReadSeconds       float64 `json:"read_seconds"` // first record received until everything was read
	ReadMsgsPerSec    float64 `json:"read_msgs_per_sec"`
	ReadMBPerSec      float64 `json:"read_mb_per_sec"`
}

// CrashResult is the consumer-crash scenario's measurement.
type CrashResult struct {
	KilledAtSeconds float64 `json:"killed_at_seconds"` // since the first phase began
	Resumed         bool    `json:"resumed"`
	PauseSeconds    float64 `json:"pause_seconds"` // kill until the killed member's records flowed again
	Replayed        int64   `json:"replayed"`      // records delivered again after the kill
	Redelivered     int64   `json:"redelivered"`   // JetStream: deliveries flagged as redeliveries
}

// Sample is one interval of the time series.
type Sample struct {
	T              float64 `json:"t_s"`
	Phase          string  `json:"phase"`
	SentPerSec     float64 `json:"sent_per_sec"`
	AckedPerSec    float64 `json:"acked_per_sec"`
	ConsumedPerSec float64 `json:"consumed_per_sec"`
	ProduceMBps    float64 `json:"produce_mb_per_sec"`
	ConsumeMBps    float64 `json:"consume_mb_per_sec"`
	AckP50Ms       float64 `json:"ack_p50_ms"`
	AckP99Ms       float64 `json:"ack_p99_ms"`
	E2EP50Ms       float64 `json:"e2e_p50_ms"`
	E2EP99Ms       float64 `json:"e2e_p99_ms"`
	Lag            int64   `json:"lag"`
	Backlog        int64   `json:"backlog"`
	Errors         int64   `json:"errors"`
}

func newResult(cfg Config, mode string) *Result {
	return &Result{
		System: cfg.System, Label: cfg.Label, Scenario: cfg.Scenario, Topic: cfg.Topic,
		TargetRate: cfg.Rate, Producers: cfg.Producers, Consumers: cfg.Consumers, ConsumerMode: mode,
		Partitions: cfg.Partitions, Sizes: cfg.Sizes, Keys: cfg.Keys, Acks: cfg.Acks,
		Idempotent: cfg.Idempotent, LingerMs: float64(cfg.Linger) / float64(time.Millisecond),
		BatchBytes: cfg.BatchBytes, InFlight: cfg.InFlight,
	}
}

const mb = 1e6

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func (rn *run) fill(res *Result, prodEnd, consumeStart time.Time, caughtUp bool) {
	c := rn.col
	lastAck := time.Unix(0, c.lastAck.Load())
	if c.lastAck.Load() == 0 || lastAck.Before(rn.start) {
		lastAck = prodEnd
	}
	pd := lastAck.Sub(rn.start)
	res.ProduceSeconds = pd.Seconds()
	res.Produced = Throughput{Records: c.acked.Load(), Failed: c.failed.Load(), Bytes: c.ackBytes.Load()}
	res.Produced.MsgsPerSec = rate(res.Produced.Records, pd)
	res.Produced.MBPerSec = rate(res.Produced.Bytes, pd) / mb

	cs := consumeStart
	if !rn.sc.prefill {
		cs = rn.start
	}
	lastDeliver := time.Unix(0, c.lastDeliver.Load())
	cd := lastDeliver.Sub(cs)
	res.Consumed = Throughput{Records: c.unique.Load(), Duplicates: c.dup.Load(), Bytes: c.conBytes.Load()}
	if c.lastDeliver.Load() != 0 {
		res.Consumed.MsgsPerSec = rate(res.Consumed.Records, cd)
		res.Consumed.MBPerSec = rate(res.Consumed.Bytes, cd) / mb
	}
	res.AckLatency = c.ack.Summary()
	res.E2ELatency = c.e2e.Summary()
	if ks, ok := rn.sys.(*kafkaSystem); ok {
		res.FetchLatency = ks.fetch.Summary()
	}
	res.Errors = c.errorCounts()

	rn.mu.Lock()
	res.Series = append([]Sample(nil), rn.series...)
	rn.mu.Unlock()
	res.Lag = LagResult{Final: c.lag(), CaughtUp: caughtUp}
	for _, s := range res.Series {
		res.Lag.Max = max(res.Lag.Max, s.Lag)
	}
	if caughtUp && rn.cfg.Consumers > 0 {
		end := lastDeliver
		if end.Before(prodEnd) {
			end = prodEnd
		}
		res.Lag.CatchUpSeconds = end.Sub(prodEnd).Seconds()
	}
	if rn.sc.prefill && res.Replay != nil && c.firstDeliver.Load() != 0 {
		rd := lastDeliver.Sub(time.Unix(0, c.firstDeliver.Load()))
		res.Replay.ReadSeconds = rd.Seconds()
		res.Replay.ReadMsgsPerSec = rate(res.Consumed.Records, rd)
		res.Replay.ReadMBPerSec = rate(res.Consumed.Bytes, rd) / mb
	}
	if rn.cfg.Scenario == ScenarioPeak {
		d := rn.drainRes
		res.Peak = &PeakResult{SteadyRate: rn.cfg.Rate, PeakRate: rn.cfg.Rate * rn.cfg.PeakFactor,
			PeakSeconds: rn.cfg.PeakDuration.Seconds(), MaxBacklog: d.maxBack, DrainThreshold: d.threshold,
			DrainSeconds: d.drainTime.Seconds(), Drained: d.ok}
	}
	if rn.sc.crash {
		cr := c.crashResult()
		res.Crash = &CrashResult{Resumed: cr.resumed, PauseSeconds: cr.pause.Seconds(), Replayed: cr.replayed, Redelivered: cr.redelivered}
		if cr.member >= 0 {
			res.Crash.KilledAtSeconds = cr.at.Sub(rn.start).Seconds()
		}
	}
}

// sampler turns the collector's counters into per-interval Samples.
// Owned by one goroutine at a time (the sample loop, then execute).
type sampler struct {
	rn                                                *run
	prevT                                             time.Time
	prevSent, prevAcked, prevCons, prevAckB, prevConB int64
	prevErr                                           int64
}

func (rn *run) newSampler() *sampler { return &sampler{rn: rn, prevT: rn.clock.Now()} }

// take appends the Sample since the previous one and prints the progress line.
func (sm *sampler) take() {
	rn, c := sm.rn, sm.rn.col
	now := rn.clock.Now()
	dt := now.Sub(sm.prevT)
	if dt <= 0 {
		return
	}
	sm.prevT = now
	sent, acked, cons := c.sent.Load(), c.acked.Load(), c.unique.Load()
	ackB, conB, errs := c.ackBytes.Load(), c.conBytes.Load(), c.errorTotal()
	ackI, e2eI := c.ack.TakeInterval(), c.e2e.TakeInterval()
	rn.mu.Lock()
	s := Sample{
		T: now.Sub(rn.start).Seconds(), Phase: rn.phase,
		SentPerSec: rate(sent-sm.prevSent, dt), AckedPerSec: rate(acked-sm.prevAcked, dt),
		ConsumedPerSec: rate(cons-sm.prevCons, dt),
		ProduceMBps:    rate(ackB-sm.prevAckB, dt) / mb, ConsumeMBps: rate(conB-sm.prevConB, dt) / mb,
		AckP50Ms: ackI.P50Ms, AckP99Ms: ackI.P99Ms, E2EP50Ms: e2eI.P50Ms, E2EP99Ms: e2eI.P99Ms,
		Lag: c.lag(), Backlog: c.backlog(), Errors: errs - sm.prevErr,
	}
	rn.series = append(rn.series, s)
	rn.mu.Unlock()
	sm.prevSent, sm.prevAcked, sm.prevCons, sm.prevAckB, sm.prevConB, sm.prevErr = sent, acked, cons, ackB, conB, errs
	if rn.cfg.Progress {
		fmt.Fprintln(rn.stderr, progressLine(s))
	}
}

// sample takes one Sample per interval until ctx ends.
func (sm *sampler) sample(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sm.rn.clock.After(sm.rn.cfg.Interval):
		}
		sm.take()
	}
}

func progressLine(s Sample) string {
	return fmt.Sprintf("[%5.1fs %-8s] sent %8.0f/s acked %8.0f/s (%6.2f MB/s) consumed %8.0f/s | ack p50 %7.2fms p99 %7.2fms | e2e p99 %7.2fms | lag %7d backlog %7d | errors %d",
		s.T, s.Phase, s.SentPerSec, s.AckedPerSec, s.ProduceMBps, s.ConsumedPerSec,
		s.AckP50Ms, s.AckP99Ms, s.E2EP99Ms, s.Lag, s.Backlog, s.Errors)
}
