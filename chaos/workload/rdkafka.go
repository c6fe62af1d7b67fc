package workload

// This file owns the librdkafka producers (Config.LibrdkafkaProducers): each
// an idempotent confluent-kafka-python producer (rdkafka_producer.py, run
// with Config.Python) that this file drives over its stdin at its share of
// Config.Rate, with the same keys, partitions and "<key>-<process>-<seq>"
// values as the kgo producers, recording each send from the report the
// script prints on stdout. A second Kafka client implementation in the
// history: what the checker holds kgo's sends to, it holds librdkafka's to.
//
// Invariant: a send's invoke is taken before its line is written to the
// script, and its completion when its report is read, so each event's
// interval contains the real send.
// Invariant: every send written is recorded exactly once: from its report
// (OK: ok with its offset; ERR: info, since librdkafka retries internally
// and an error says nothing definite about earlier attempts), or as info
// when the script ends without reporting it.
// pending (guarded by mu) holds the sends written and not yet reported;
// seq and rng belong to run's goroutine.

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/chaos/history"
)

//go:embed rdkafka_producer.py
var rdkafkaScript string

// DefaultPython runs the librdkafka producers: Debian's interpreter, where
// python3-confluent-kafka installs confluent_kafka.
const DefaultPython = "/usr/bin/python3"

// CheckLibrdkafka reports whether python can import confluent_kafka.
func CheckLibrdkafka(python string) error {
	if python == "" {
		python = DefaultPython
	}
	out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput()
	if err != nil {
		return fmt.Errorf("workload: %s cannot import confluent_kafka (python3-confluent-kafka): %w: %s", python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

type rdSend struct {
	key       string
	partition int32
	invoke    history.Nanos
}

type rdProducer struct {
	w       *Workload
	process history.Process
	cmd     *exec.Cmd
	stdin   io.WriteCloser

	stopLoop context.CancelFunc
	done     chan struct{} // closed when run returns
	reported chan struct{} // closed when the script's stdout ended

	mu      sync.Mutex
	pending map[string]rdSend // by value; guarded by mu

	rng *rand.Rand // run's goroutine only
	seq int        // run's goroutine only
}

// startRdProducer starts one librdkafka producer and waits until the script
// says it is ready.
func (w *Workload) startRdProducer(ctx context.Context, interval time.Duration) (*rdProducer, error) {
	process := w.newProcess()
	cmd := exec.Command(w.cfg.Python, "-u", "-c", rdkafkaScript, strings.Join(w.cfg.Bootstrap, ","), w.cfg.Topic,
		strconv.FormatInt(w.cfg.DeliveryTimeout.Milliseconds(), 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("workload: librdkafka producer: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("workload: librdkafka producer: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("workload: librdkafka producer: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("workload: librdkafka producer: start %s: %w", w.cfg.Python, err)
	}
	p := &rdProducer{w: w, process: process, cmd: cmd, stdin: stdin,
		done: make(chan struct{}), reported: make(chan struct{}),
		pending: make(map[string]rdSend),
		rng:     rand.New(rand.NewPCG(w.cfg.Seed, uint64(process)))}
	log := w.log.With().Int("process", int(process)).Str("client", "librdkafka").Logger()
	w.bg.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Info().Str("stderr", sc.Text()).Msg("librdkafka producer")
		}
	})
	ready := make(chan struct{})
	go p.readReports(stdout, ready)
	select {
	case <-ready:
	case <-p.reported:
		_ = cmd.Wait()
		return nil, fmt.Errorf("workload: librdkafka producer exited before it was ready (see its stderr in the log)")
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-p.reported
		_ = cmd.Wait()
		return nil, fmt.Errorf("workload: librdkafka producer not ready: %w", ctx.Err())
	}
	loopCtx, stopLoop := context.WithCancel(context.Background())
	p.stopLoop = stopLoop
	go p.run(loopCtx, interval)
	log.Info().Int("pid", cmd.Process.Pid).Msg("librdkafka producer started")
	return p, nil
}

// run writes one send per interval until loopCtx ends, as producer.run.
func (p *rdProducer) run(loopCtx context.Context, interval time.Duration) {
	defer close(p.done)
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-loopCtx.Done():
			return
		case <-t.C:
		}
		if !p.send() {
			return
		}
		next = next.Add(interval)
		if now := time.Now(); now.Sub(next) > maxBehind {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// send writes one keyed send to the script; false once it cannot.
func (p *rdProducer) send() bool {
	cfg := &p.w.cfg
	k := p.rng.IntN(cfg.Keys)
	key := fmt.Sprintf("k%d", k)
	part := int32(k % int(cfg.Partitions))
	p.seq++
	value := fmt.Sprintf("%s-%d-%d", key, p.process, p.seq)
	p.mu.Lock()
	p.pending[value] = rdSend{key: key, partition: part, invoke: p.w.rec.Now()}
	p.mu.Unlock()
	if _, err := fmt.Fprintf(p.stdin, "%d %s %s\n", part, key, value); err != nil {
		// Never handed over: it cannot have been written.
		p.mu.Lock()
		s, ok := p.pending[value]
		delete(p.pending, value)
		p.mu.Unlock()
		if ok {
			p.record(value, s, history.Fail, "not handed to the librdkafka producer: "+err.Error(), history.NoOffset)
		}
		p.w.log.Warn().Err(err).Int("process", int(p.process)).Msg("librdkafka producer: stdin closed")
		return false
	}
	return true
}

// readReports records the script's reports until its stdout ends; ready is
// closed at READY.
func (p *rdProducer) readReports(stdout io.Reader, ready chan struct{}) {
	defer close(p.reported)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "READY":
			close(ready)
		case f[0] == "OK" && len(f) == 4:
			part, perr := strconv.ParseInt(f[2], 10, 32)
			off, oerr := strconv.ParseInt(f[3], 10, 64)
			if s, ok := p.take(f[1]); ok {
				if err := errors.Join(perr, oerr); err != nil || int32(part) != s.partition {
					p.record(f[1], s, history.Info, "unreadable report: "+line, history.NoOffset)
					continue
				}
				p.record(f[1], s, history.OK, "", history.Offset(off))
			}
		case f[0] == "ERR" && len(f) >= 3:
			if s, ok := p.take(f[1]); ok {
				p.record(f[1], s, history.Info, strings.Join(f[2:], " "), history.NoOffset)
			}
		default:
			p.w.log.Info().Int("process", int(p.process)).Str("report", line).Msg("librdkafka producer")
		}
	}
}

func (p *rdProducer) take(value string) (rdSend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.pending[value]
	delete(p.pending, value)
	return s, ok
}

func (p *rdProducer) record(value string, s rdSend, outcome history.Outcome, why string, off history.Offset) {
	p.w.record(history.Send{
		Process: p.process, Key: s.key, Value: value, Partition: history.Partition(s.partition),
		Offset: off, LeaderEpoch: history.NoEpoch, Invoke: s.invoke, Complete: p.w.rec.Now(),
		Outcome: outcome, Error: why,
	})
	if outcome == history.OK {
		p.w.n.rdkOK.Add(1)
	} else {
		p.w.n.rdkNotOK.Add(1)
	}
}

// stop ends the schedule and closes the script's stdin, so it flushes (for
// up to its delivery timeout) and exits; past timeout it is killed. Sends
// left without a report are recorded as info.
func (p *rdProducer) stop(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	p.stopLoop()
	select {
	case <-p.done:
	case <-time.After(timeout):
		// run is blocked writing to a script that reads no more.
		p.w.log.Warn().Int("process", int(p.process)).Msg("librdkafka producer: stdin blocked; killing it")
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.stdin.Close()
	select {
	case <-p.reported:
	case <-time.After(time.Until(deadline)):
		p.w.log.Warn().Int("process", int(p.process)).Msg("librdkafka producer: no exit after its flush; killing it")
		_ = p.cmd.Process.Kill()
		<-p.reported
	}
	if err := p.cmd.Wait(); err != nil {
		p.w.log.Warn().Err(err).Int("process", int(p.process)).Msg("librdkafka producer exited")
	}
	p.mu.Lock()
	left := p.pending
	p.pending = nil
	p.mu.Unlock()
	for value, s := range left {
		p.record(value, s, history.Info, "no delivery report before the librdkafka producer exited", history.NoOffset)
	}
}
