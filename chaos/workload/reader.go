package workload

// This file owns the consumers that read partitions directly: the readers
// that run beside the workload and the final drain; and recordPoll, which
// turns what any consumer's poll returned into poll and seek events.
//
// Invariant: a consumer's position moves only by reading, or by a seek that
// is recorded before any record read from the new position (the client's
// start, an OFFSET_OUT_OF_RANGE the workload resolves, a reset kgo reports
// as ErrDataLoss).
// Invariant: the drain records a partition's final event only after its
// reader reached the high watermark listed last, or gave up (Drain then
// returns an error).
// A reader's fields are immutable after start; its goroutine owns its
// client's polling.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/history"
)

type reader struct {
	w       *Workload
	process history.Process
	part    int32
	cl      *kgo.Client
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
}

// startReader lists partition p's log start, records the reader's seek
// there, and starts reading from it.
func (w *Workload) startReader(ctx context.Context, p int32) (*reader, error) {
	process := w.newProcess()
	cl, err := w.partitionClient(ctx, w.admin, process, p, fmt.Sprintf("reader-%d", process))
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &reader{w: w, process: process, part: p, cl: cl, cancel: cancel, done: make(chan struct{})}
	go r.run(rctx)
	return r, nil
}

// partitionClient lists p's log start, records process's seek there, and
// returns a client reading p from it.
func (w *Workload) partitionClient(ctx context.Context, adm *kadm.Client, process history.Process, p int32, name string, extra ...kgo.Opt) (*kgo.Client, error) {
	start, err := listOffset(ctx, adm, w.cfg.Topic, p, false)
	if err != nil {
		return nil, err
	}
	w.record(history.Seek{Process: process, Partition: history.Partition(p), Offset: start, At: w.rec.Now()})
	cl, err := kgo.NewClient(w.clientOpts(name, append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: {p: kgo.NewOffset().At(int64(start))}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(fetchMaxWait),
	}, extra...)...)...)
	if err != nil {
		return nil, fmt.Errorf("workload: %s: %w", name, err)
	}
	return cl, nil
}

func (r *reader) run(ctx context.Context) {
	defer close(r.done)
	who := pollID{process: r.process, consumer: history.ConsumerReader, gen: history.NoGeneration}
	for ctx.Err() == nil {
		invoke := r.w.rec.Now()
		fs := r.cl.PollFetches(ctx)
		r.w.recordPoll(ctx, r.cl, r.w.admin, fs, who, invoke, r.w.rec.Now(), nil)
	}
}

func (r *reader) stop() {
	r.cancel()
	<-r.done
	r.cl.Close()
}

// Drain reads every partition with a fresh reader from its log start to its
// high watermark, recording drain polls, then records the partition's final
// event with the log start and high watermark it read between. Call it
// after Stop. The high watermark is listed again whenever the reader
// reaches it, until it stops moving. If ctx ends first, the partitions
// still short get a final event at the high watermark anyway (the checker
// then reports what the drain missed as unseen) and Drain returns an error;
// a partition whose offsets could not be listed gets none.
func (w *Workload) Drain(ctx context.Context) error {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	if !stopped {
		return errors.New("workload: drain before stop")
	}
	cl, err := kgo.NewClient(w.clientOpts("drain-admin")...)
	if err != nil {
		return fmt.Errorf("workload: drain: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	errs := make([]error, w.cfg.Partitions)
	var wg sync.WaitGroup
	for p := range w.cfg.Partitions {
		wg.Go(func() { errs[p] = w.drainPartition(ctx, adm, p) })
	}
	wg.Wait()
	if err := w.rec.Flush(); err != nil {
		w.noteRecordError(err)
	}
	return errors.Join(append(errs, w.Err())...)
}

func (w *Workload) drainPartition(ctx context.Context, adm *kadm.Client, p int32) error {
	hw, err := listOffset(ctx, adm, w.cfg.Topic, p, true)
	if err != nil {
		return fmt.Errorf("workload: drain partition %d: %w", p, err)
	}
	process := w.newProcess()
	// Control records are kept (and not recorded) so the reader knows its
	// position when the log ends with one.
	cl, err := w.partitionClient(ctx, adm, process, p, fmt.Sprintf("drain-%d", process), kgo.KeepControlRecords())
	if err != nil {
		return fmt.Errorf("workload: drain partition %d: %w", p, err)
	}
	defer cl.Close()
	logStart, err := listOffset(ctx, adm, w.cfg.Topic, p, false) // as the seek listed it, or later
	if err != nil {
		return fmt.Errorf("workload: drain partition %d: %w", p, err)
	}
	who := pollID{process: process, consumer: history.ConsumerDrain, gen: history.NoGeneration}
	pos := logStart
	var short error
	for pos < hw {
		if ctx.Err() != nil {
			short = fmt.Errorf("workload: drain partition %d stopped at offset %d of [%d, %d): %w", p, pos, logStart, hw, ctx.Err())
			break
		}
		invoke := w.rec.Now()
		fs := cl.PollFetches(ctx)
		got := w.recordPoll(ctx, cl, adm, fs, who, invoke, w.rec.Now(), func(start history.Offset) { logStart, pos = start, max(pos, start) })
		if next, ok := got.next[p]; ok {
			pos = max(pos, history.Offset(next))
		}
		if pos >= hw {
			if again, err := listOffset(ctx, adm, w.cfg.Topic, p, true); err == nil {
				hw = again
			}
		}
	}
	w.record(history.Final{Partition: history.Partition(p), LogStart: min(logStart, hw), HighWatermark: hw, At: w.rec.Now()})
	return short
}

// pollID is who polled, as poll events name it.
type pollID struct {
	process  history.Process
	consumer history.Consumer
	group    string
	member   string
	gen      history.Generation
}

// polled is what recordPoll found in one client poll.
type polled struct {
	order []int32               // partitions with data records, in the order returned
	last  map[int32]*kgo.Record // the last data record of each
	next  map[int32]int64       // one past the last record of each, control records included
}

// recordPoll records one client poll: one poll event per partition with
// data records, in the order kgo returned them, and a seek wherever the
// client's position moved other than by reading, with the partition's
// records before the seek recorded first. An OFFSET_OUT_OF_RANGE is
// resolved by moving the client to the log start (listed with adm) and
// recording a seek there; onReset, when set, is told the new start.
func (w *Workload) recordPoll(ctx context.Context, cl *kgo.Client, adm *kadm.Client, fs kgo.Fetches, who pollID,
	invoke, complete history.Nanos, onReset func(history.Offset)) polled {
	got := polled{last: make(map[int32]*kgo.Record), next: make(map[int32]int64)}
	pending := make(map[int32][]history.Record)
	var pendingOrder []int32
	flush := func(p int32) {
		if len(pending[p]) == 0 {
			return
		}
		w.record(history.Poll{
			Process: who.process, Consumer: who.consumer, Group: who.group, Member: who.member, Generation: who.gen,
			Partition: history.Partition(p), Records: pending[p], Invoke: invoke, Complete: complete,
		})
		delete(pending, p)
	}
	seek := func(p int32, at history.Offset) {
		flush(p)
		w.record(history.Seek{Process: who.process, Partition: history.Partition(p), Offset: at, At: w.rec.Now()})
	}
	for _, f := range fs {
		for _, t := range f.Topics {
			if t.Topic != w.cfg.Topic {
				continue
			}
			for _, fp := range t.Partitions {
				p := fp.Partition
				if fp.Err != nil {
					w.positionError(ctx, cl, adm, who, fp, seek, onReset)
				}
				for _, r := range fp.Records {
					got.next[p] = max(got.next[p], r.Offset+1)
					if r.Attrs.IsControl() {
						continue
					}
					if _, ok := got.last[p]; !ok {
						got.order = append(got.order, p)
					}
					got.last[p] = r
					if _, ok := pending[p]; !ok {
						pendingOrder = append(pendingOrder, p)
					}
					pending[p] = append(pending[p], history.Record{
						Offset: history.Offset(r.Offset), Key: string(r.Key), Value: string(r.Value), LeaderEpoch: epochOf(r),
					})
				}
			}
		}
	}
	for _, p := range pendingOrder {
		flush(p)
	}
	return got
}

// positionError handles a partition's fetch error: a reset kgo made
// (ErrDataLoss) is recorded as a seek; an OFFSET_OUT_OF_RANGE (fatal to the
// partition under NoResetOffset) moves the client to the log start; other
// errors are transient for kgo and only logged.
func (w *Workload) positionError(ctx context.Context, cl *kgo.Client, adm *kadm.Client, who pollID, fp kgo.FetchPartition,
	seek func(int32, history.Offset), onReset func(history.Offset)) {
	p := fp.Partition
	log := w.log.Warn().Err(fp.Err).Int("process", int(who.process)).Int32("partition", p)
	var loss *kgo.ErrDataLoss
	switch {
	case errors.As(fp.Err, &loss) && loss.ResetTo >= 0:
		log.Int64("reset_to", loss.ResetTo).Msg("consumer: kgo reset its position after detecting data loss")
		seek(p, history.Offset(loss.ResetTo))
	case errors.Is(fp.Err, kerr.OffsetOutOfRange):
		start, err := listOffset(ctx, adm, w.cfg.Topic, p, false)
		if err != nil {
			log.AnErr("list", err).Msg("consumer: offset out of range; log start not listed, partition stays stopped")
			return
		}
		log.Int64("log_start", int64(start)).Msg("consumer: offset out of range; seeking to the log start")
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{w.cfg.Topic: {p: {Epoch: -1, Offset: int64(start)}}})
		seek(p, start)
		if onReset != nil {
			onReset(start)
		}
	default:
		w.log.Debug().Err(fp.Err).Int("process", int(who.process)).Int32("partition", p).Msg("consumer: fetch error")
	}
}

// epochOf is a consumed record's leader epoch, or NoEpoch.
func epochOf(r *kgo.Record) history.Epoch {
	if r.LeaderEpoch < 0 {
		return history.NoEpoch
	}
	return history.Epoch(r.LeaderEpoch)
}
