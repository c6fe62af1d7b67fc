package loadgen

// This file owns a run: Runner.Execute sets the system up, starts the
// consumers, the sampler and the scenario monitor, drives the producers
// through the scenario's phases, waits for the consumers to catch up and
// assembles the Result. Every goroutine it starts is cancelled and waited
// for before it returns.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Runner runs one configured scenario.
type Runner struct {
	cfg    Config
	log    zerolog.Logger
	clock  Clock
	stdout io.Writer
	stderr io.Writer
}

// New validates cfg and returns a Runner writing reports to stdout and the
// progress line to stderr.
func New(cfg Config, logger zerolog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, log: logger.With().Str("component", "loadgen").Logger(),
		clock: SystemClock{}, stdout: os.Stdout, stderr: os.Stderr}, nil
}

// SetOutput redirects the report (stdout) and progress line (stderr).
func (r *Runner) SetOutput(stdout, stderr io.Writer) { r.stdout, r.stderr = stdout, stderr }

// Run executes the scenario and writes the reports.
func (r *Runner) Run(ctx context.Context) error {
	res, err := r.Execute(ctx)
	if err != nil {
		return err
	}
	return r.writeReports(res)
}

func (r *Runner) writeReports(res *Result) error {
	if r.cfg.JSON {
		if err := WriteJSON(r.stdout, res); err != nil {
			return err
		}
	} else if err := WriteTable(r.stdout, res); err != nil {
		return err
	}
	write := func(path string, f func(io.Writer, *Result) error) error {
		if path == "" {
			return nil
		}
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("loadgen: create %s: %w", path, err)
		}
		if err := f(out, res); err != nil {
			_ = out.Close() // the write error is the one to report
			return err
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("loadgen: close %s: %w", path, err)
		}
		return nil
	}
	if err := write(r.cfg.CSVPath, WriteCSV); err != nil {
		return err
	}
	return write(r.cfg.SVGPath, WriteSVG)
}

func newSystem(cfg Config, log zerolog.Logger) (System, error) {
	switch cfg.System {
	case SystemJetStream:
		return newJetStreamSystem(cfg, log)
	case SystemHTTP:
		return newHTTPSystem(cfg, log)
	}
	return newKafkaSystem(cfg, log)
}

// run is the state of one Execute call.
type run struct {
	*Runner
	cfg      Config // resolved
	sc       scenario
	sys      System
	col      *collector
	sizes    *SizeDist
	keys     *KeyDist
	payload  []byte
	phases   []phase
	start    time.Time     // first phase begins
	drained  chan struct{} // closed by the monitor when the peak backlog has drained
	drainRes drainResult   // written by the monitor before drained is closed or monitor exits

	mu     sync.Mutex
	series []Sample // guarded by mu
	phase  string   // guarded by mu
}

type drainResult struct {
	threshold int64
	maxBack   int64
	drainTime time.Duration
	ok        bool
}

// Execute runs the scenario and returns its measurements.
func (r *Runner) Execute(ctx context.Context) (*Result, error) {
	cfg := r.cfg.resolved(r.clock.Now())
	rn := &run{Runner: r, cfg: cfg, sc: scenarios[cfg.Scenario], drained: make(chan struct{})}
	var err error
	if rn.sizes, err = ParseSizes(cfg.Sizes); err != nil {
		return nil, err
	}
	if rn.keys, err = ParseKeys(cfg.Keys); err != nil {
		return nil, err
	}
	rn.payload = make([]byte, rn.sizes.Max())
	for i := range rn.payload {
		rn.payload[i] = byte(rand.Uint32())
	}
	if rn.sys, err = newSystem(cfg, r.log); err != nil {
		return nil, err
	}
	defer rn.sys.Close()
	setupCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := rn.sys.Setup(setupCtx, cfg.Topic, cfg.Partitions); err != nil {
		return nil, err
	}
	if cfg.Cleanup {
		defer func() {
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := rn.sys.Teardown(tctx, cfg.Topic); err != nil {
				r.log.Warn().Err(err).Msg("teardown")
			}
		}()
	}
	mode, err := rn.consumerMode(setupCtx)
	if err != nil {
		return nil, err
	}
	rn.col = newCollector(r.clock, rn.sys.OrderedPartitions(), cfg.Producers)
	res := newResult(cfg, mode)
	return res, rn.execute(ctx, mode, res)
}

func (rn *run) consumerMode(ctx context.Context) (string, error) {
	if rn.cfg.Consumers == 0 {
		return "", nil
	}
	ok, err := rn.sys.GroupsSupported(ctx)
	if err != nil {
		return "", err
	}
	switch rn.cfg.ConsumerMode {
	case ConsumerGroup:
		if !ok {
			return "", ErrGroupsUnsupported
		}
		return ConsumerGroup, nil
	case ConsumerAssign:
		return ConsumerAssign, nil
	}
	if !ok {
		rn.log.Warn().Msg("consumer groups are not supported by the cluster; consuming by direct partition assignment")
		return ConsumerAssign, nil
	}
	return ConsumerGroup, nil
}

func (rn *run) execute(ctx context.Context, mode string, res *Result) error {
	cfg := rn.cfg
	prods := make([]Producer, cfg.Producers)
	defer func() {
		for _, p := range prods {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i := range prods {
		p, err := rn.sys.NewProducer(ctx, i)
		if err != nil {
			return err
		}
		prods[i] = p
	}
	if rn.sc.prefill {
		if err := rn.prefill(ctx, prods, res); err != nil {
			return err
		}
		rn.col.e2eOn.Store(false) // prefilled records are old on purpose
	}

	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()

	consumeStart := rn.clock.Now()
	consumers, err := rn.startConsumers(bg, mode, &bgWG)
	defer closeAll(consumers)
	if err != nil {
		return err
	}

	rn.waitReady(ctx, consumers)
	rn.phases = rn.sc.phases(cfg)
	rn.start = rn.clock.Now().Add(50 * time.Millisecond)
	rn.setPhase("start")
	sm := rn.newSampler()
	bgWG.Add(2)
	go func() { defer bgWG.Done(); sm.sample(bg) }()
	go func() { defer bgWG.Done(); rn.monitor(bg, consumers) }()

	rn.produce(ctx, prods)
	flushCtx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	for _, p := range prods {
		if err := p.Flush(flushCtx); err != nil {
			rn.col.recordError("flush", err)
		}
	}
	cancel()
	prodEnd := rn.clock.Now()
	rn.setPhase("catch-up")
	caughtUp := rn.waitCaughtUp(ctx, len(consumers) > 0)
	if ctx.Err() != nil {
		return fmt.Errorf("loadgen: run: %w", ctx.Err())
	}
	stopBG()
	bgWG.Wait()
	sm.take() // the last, partial interval
	rn.fill(res, prodEnd, consumeStart, caughtUp)
	return nil
}

func (rn *run) setPhase(p string) {
	rn.mu.Lock()
	rn.phase = p
	rn.mu.Unlock()
}

func (rn *run) startConsumers(ctx context.Context, mode string, wg *sync.WaitGroup) ([]Consumer, error) {
	var out []Consumer
	for i := 0; i < rn.cfg.Consumers; i++ {
		spec := ConsumerSpec{ID: i, Topic: rn.cfg.Topic, FromStart: true}
		if mode == ConsumerGroup {
			spec.Group = rn.cfg.Group
		} else {
			for p := i; p < rn.cfg.Partitions; p += rn.cfg.Consumers {
				spec.Partitions = append(spec.Partitions, int32(p))
			}
			if len(spec.Partitions) == 0 {
				continue // more consumers than partitions
			}
		}
		c, err := rn.sys.NewConsumer(ctx, spec)
		if err != nil {
			return out, err
		}
		out = append(out, c)
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			if err := c.Run(ctx, memberSink{c: rn.col, id: id}); err != nil {
				rn.col.recordError("consume", err)
			}
		}(i)
	}
	return out, nil
}

// readyTimeout bounds the wait for consumers to get their partitions.
const readyTimeout = 30 * time.Second

// waitReady waits until the members that can own partitions are receiving,
// so production does not start into a group that is still joining (which
// would show up as end-to-end latency).
func (rn *run) waitReady(ctx context.Context, consumers []Consumer) {
	want := len(consumers)
	if rn.sys.OrderedPartitions() {
		want = min(want, rn.cfg.Partitions)
	}
	deadline := rn.clock.Now().Add(readyTimeout)
	for {
		ready := 0
		for _, c := range consumers {
			select {
			case <-c.Ready():
				ready++
			default:
			}
		}
		if ready >= want || ctx.Err() != nil {
			return
		}
		if rn.clock.Now().After(deadline) {
			rn.log.Warn().Int("ready", ready).Int("members", want).Msg("consumers not all assigned; producing anyway")
			return
		}
		select {
		case <-ctx.Done():
		case <-rn.clock.After(10 * time.Millisecond):
		}
	}
}

// produce drives every producer through the phases and returns when all are done.
func (rn *run) produce(ctx context.Context, prods []Producer) {
	var wg sync.WaitGroup
	for i, p := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rn.producer(ctx, i, p)
		}()
	}
	wg.Wait()
}

func (rn *run) producer(ctx context.Context, id int, p Producer) {
	r := rand.New(rand.NewPCG(uint64(id)+1, uint64(rn.start.UnixNano())))
	keys := rn.keys.Picker(r)
	n := len(rn.phases)
	var seq int64
	phaseStart := rn.start
	for k, ph := range rn.phases {
		end := phaseStart.Add(ph.dur)
		hardStop := end.Add(rn.cfg.DrainTimeout) // an unreachable rate gives up here
		if id == 0 {
			rn.setPhase(ph.name)
		}
		send := func(sched, base time.Time) bool {
			size := rn.sizes.Next(r)
			key := keys.Next()
			part := int32(keys.Index())
			if part < 0 {
				part = int32(id)
			}
			seq++
			msg := &Message{Key: key, Value: rn.payload[:size], Partition: part % int32(rn.cfg.Partitions),
				Scheduled: sched, Seq: seq}
			rn.col.sent.Add(1)
			err := p.Publish(ctx, msg, func(err error) { rn.col.acknowledged(base, size, err) })
			if err != nil {
				rn.col.acknowledged(base, size, err)
				return ctx.Err() == nil
			}
			return true
		}
		drained := func() bool {
			if !ph.untilDrained {
				return false
			}
			select {
			case <-rn.drained:
				return true
			default:
				return false
			}
		}
		if ph.rate > 0 {
			per := ph.rate / float64(rn.cfg.Producers)
			pacer := NewPacer(phaseStart.Add(time.Duration(float64(id)*float64(time.Second)/ph.rate)), per)
			lim := &Limiter{Pacer: pacer, Clock: rn.clock}
			for pacer.Peek().Before(end) && !drained() && ctx.Err() == nil {
				if rn.clock.Now().After(hardStop) {
					rn.col.recordError("produce", fmt.Errorf("phase %s: target rate not reached, schedule abandoned", ph.name))
					break
				}
				sched, base, err := lim.Wait(ctx)
				if err != nil {
					break
				}
				if !send(sched, base) {
					break
				}
				rn.col.behind[id].Store(pacer.Behind(rn.clock.Now()))
			}
			rn.col.behind[id].Store(0)
		} else {
			rn.waitUntil(ctx, phaseStart)
			for now := rn.clock.Now(); now.Before(end) && !drained() && ctx.Err() == nil; now = rn.clock.Now() {
				if !send(now, now) {
					break
				}
			}
		}
		if k < n-1 {
			phaseStart = end
		}
	}
}

func (rn *run) waitUntil(ctx context.Context, t time.Time) {
	if d := t.Sub(rn.clock.Now()); d > 0 {
		select {
		case <-ctx.Done():
		case <-rn.clock.After(d):
		}
	}
}

// waitCaughtUp polls until consumers have read everything acknowledged (and
// prefilled), or DrainTimeout passes; it returns whether they did.
func (rn *run) waitCaughtUp(ctx context.Context, consuming bool) bool {
	if !consuming {
		return true
	}
	deadline := rn.clock.Now().Add(rn.cfg.DrainTimeout)
	for rn.col.lag() > 0 {
		if ctx.Err() != nil || rn.clock.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
		case <-rn.clock.After(10 * time.Millisecond):
		}
	}
	return true
}

// prefill writes cfg.Prefill records as fast as the producers go.
func (rn *run) prefill(ctx context.Context, prods []Producer, res *Result) error {
	var acked, failed int64
	var mu sync.Mutex
	start := rn.clock.Now()
	per := rn.cfg.Prefill / len(prods)
	var wg sync.WaitGroup
	for i, p := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i)+100, 7))
			keys := rn.keys.Picker(r)
			n := per
			if i == 0 {
				n += rn.cfg.Prefill % len(prods)
			}
			for j := 0; j < n && ctx.Err() == nil; j++ {
				size := rn.sizes.Next(r)
				now := rn.clock.Now()
				msg := &Message{Key: keys.Next(), Value: rn.payload[:size], Scheduled: now, Seq: int64(j + 1),
					Partition: int32(j % rn.cfg.Partitions)}
				_ = p.Publish(ctx, msg, func(err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed++
						rn.col.recordError("prefill", err)
						return
					}
					acked++
				})
			}
			if err := p.Flush(ctx); err != nil {
				rn.col.recordError("prefill", err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("loadgen: prefill: %w", ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if acked == 0 {
		return errors.New("loadgen: prefill: no record was acknowledged")
	}
	rn.col.prefilled.Store(acked)
	d := rn.clock.Now().Sub(start)
	res.Replay = &ReplayResult{Prefilled: acked, PrefillFailed: failed, PrefillSeconds: d.Seconds(),
		PrefillMsgsPerSec: float64(acked) / d.Seconds()}
	return nil
}

// monitor runs the scenario's timed actions: the consumer kill and the
// peak's drain detection.
func (rn *run) monitor(ctx context.Context, consumers []Consumer) {
	if rn.sc.crash && len(consumers) > 0 {
		rn.killMember(ctx, consumers)
	}
	rn.watchDrain(ctx)
}

// killMember kills consumer 0 at CrashAfter, once the group has settled:
// it waits (until the end of the first phase at most) for every member that
// can own a partition to be receiving.
func (rn *run) killMember(ctx context.Context, consumers []Consumer) {
	rn.waitUntil(ctx, rn.start.Add(rn.cfg.CrashAfter))
	want := len(consumers)
	if rn.sys.OrderedPartitions() {
		want = min(want, rn.cfg.Partitions)
	}
	giveUp := rn.start.Add(rn.phases[0].dur)
	for rn.col.owners() < want && rn.clock.Now().Before(giveUp) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-rn.clock.After(10 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return
	}
	if n := rn.col.owners(); n < want {
		rn.log.Warn().Int("receiving", n).Int("members", want).Msg("killing a member before the group settled")
	}
	rn.col.markKill(0)
	consumers[0].Kill()
	rn.log.Info().Msg("consumer 0 killed")
}

// watchDrain samples the backlog of a scenario with an untilDrained phase:
// its steady level during the first phase (after a warm-up third), then,
// from the start of the drain phase, the time until it is back to that
// level; it closes rn.drained then.
func (rn *run) watchDrain(ctx context.Context) {
	var drainStart time.Time
	end := rn.start
	for _, ph := range rn.phases {
		if ph.untilDrained {
			drainStart = end
			break
		}
		end = end.Add(ph.dur)
	}
	if drainStart.IsZero() {
		return
	}
	firstEnd := rn.start.Add(rn.phases[0].dur)
	warm := rn.start.Add(rn.phases[0].dur / 3)
	var base []int64
	var maxBack int64
	for {
		select {
		case <-ctx.Done():
			rn.drainRes.maxBack = maxBack
			return
		case <-rn.clock.After(20 * time.Millisecond):
		}
		now := rn.clock.Now()
		b := rn.col.backlog()
		maxBack = max(maxBack, b)
		if now.Before(firstEnd) {
			if now.After(warm) {
				base = append(base, b)
			}
			continue
		}
		if rn.drainRes.threshold == 0 {
			rn.drainRes.threshold = drainThreshold(base, rn.cfg.Rate)
		}
		if !now.Before(drainStart) && b <= rn.drainRes.threshold {
			rn.drainRes.ok = true
			rn.drainRes.drainTime = now.Sub(drainStart)
			rn.drainRes.maxBack = maxBack
			close(rn.drained)
			return
		}
	}
}

// drainThreshold is the backlog that counts as drained: twice the median
// steady-state backlog plus 50 ms of records at the steady rate.
func drainThreshold(base []int64, rate float64) int64 {
	var med int64
	if len(base) > 0 {
		s := append([]int64(nil), base...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		med = s[len(s)/2]
	}
	return 2*med + int64(rate*0.05) + 10
}

// closeAll closes the consumers concurrently, so members leaving a group do
// not wait on each other's rebalances one after another.
func closeAll(consumers []Consumer) {
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
}
