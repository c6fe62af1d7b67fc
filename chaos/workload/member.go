package workload

// This file owns the consumer-group members: one kgo client and one
// goroutine each that poll, record, then commit what they processed; their
// rebalance callbacks; a crash (RestartMember) through a dialer that can be
// cut; and the rule that classifies a commit's result (commitOutcome).
//
// Invariant: a member commits only offsets it polled and recorded, after
// recording them, and polls again only after the commit resolved; with
// BlockRebalanceOnPoll no rebalance callback runs in between.
// Invariant: nothing is recorded for a crashed member's process after the
// crash but the outcome of a commit that was in flight at the crash.
// mu guards the assignment fields (written by kgo's callback goroutine,
// read by run); crashed and commitWrites are atomics.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/history"
)

// maxPollRecords bounds the records one member poll processes.
const maxPollRecords = 500

type member struct {
	w       *Workload
	process history.Process
	cl      *kgo.Client
	dialer  *cutDialer

	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	crashed      atomic.Bool
	commitWrites atomic.Int64 // OffsetCommit requests written (commitCounter)

	mu         sync.Mutex
	memberID   string             // guarded by mu; of the last assignment
	generation history.Generation // guarded by mu; of the last assignment
	assignedAt history.Nanos      // guarded by mu; when the last assignment was recorded
}

func (w *Workload) startMember(i int) (*member, error) {
	m := &member{w: w, process: w.newProcess(), dialer: &cutDialer{}, generation: history.NoGeneration, done: make(chan struct{})}
	name := fmt.Sprintf("member-%d", m.process)
	cl, err := kgo.NewClient(w.clientOpts(name,
		kgo.WithLogger(kgoLogger{log: w.log.With().Str("client", name).Logger(), mute: &m.crashed}),
		kgo.Dialer(m.dialer.dial),
		kgo.WithHooks(commitCounter{&m.commitWrites}),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topic),
		kgo.Balancers(kgo.RangeBalancer()), // eager: see the package doc
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(w.cfg.SessionTimeout/5),
		kgo.RebalanceTimeout(w.cfg.RebalanceTimeout),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onRevoked),
	)...)
	if err != nil {
		return nil, fmt.Errorf("workload: member %d: %w", i, err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx)
	return m, nil
}

// RestartMember crashes member i, as a process killed mid-run would: its
// connections are cut and refused from then on, so it neither commits nor
// leaves the group, and the group moves its partitions only after its
// session times out. A new member with a new process id takes its place. It
// returns the new member's process id.
func (w *Workload) RestartMember(i int) (history.Process, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return 0, errors.New("workload: restart member: stopped")
	}
	if i < 0 || i >= len(w.members) {
		return 0, fmt.Errorf("workload: restart member %d of %d", i, len(w.members))
	}
	old := w.members[i]
	old.crash()
	w.bg.Go(old.cl.CloseAllowingRebalance) // over the cut dialer: no leave reaches the broker
	m, err := w.startMember(i)
	if err != nil {
		return 0, err
	}
	w.members[i] = m
	w.log.Info().Int("member", i).Int("crashed_process", int(old.process)).Int("process", int(m.process)).Msg("member restarted")
	return m.process, nil
}

// crash cuts the member off and ends its loop; it does not close the client.
func (m *member) crash() {
	m.crashed.Store(true)
	m.dialer.cutAll()
	m.cancel()
	<-m.done
}

// stop ends the loop and closes the client, leaving the group.
func (m *member) stop() {
	m.cancel()
	<-m.done
	m.cl.CloseAllowingRebalance()
}

// assignment is the member id and generation of the last assignment, and
// when it was recorded.
func (m *member) assignment() (string, history.Generation, history.Nanos) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.memberID, m.generation, m.assignedAt
}

func (m *member) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if m.crashed.Load() {
		return
	}
	id, gen := cl.GroupMetadata()
	at := m.w.rec.Now()
	m.mu.Lock()
	m.memberID, m.generation, m.assignedAt = id, history.Generation(gen), at
	m.mu.Unlock()
	m.w.record(history.Assign{Rebalance: m.rebalance(id, history.Generation(gen), assigned, at)})
}

// onRevoked records a revoke (or a loss: kgo's OnPartitionsLost) with the
// assignment's member id and generation.
func (m *member) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if m.crashed.Load() {
		return
	}
	id, gen, _ := m.assignment()
	if id == "" || gen < 0 {
		return // never assigned: nothing to revoke
	}
	m.w.record(history.Revoke{Rebalance: m.rebalance(id, gen, revoked, m.w.rec.Now())})
}

func (m *member) rebalance(id string, gen history.Generation, parts map[string][]int32, at history.Nanos) history.Rebalance {
	ps := make([]history.Partition, 0, len(parts[m.w.cfg.Topic]))
	for _, p := range parts[m.w.cfg.Topic] {
		ps = append(ps, history.Partition(p))
	}
	slices.Sort(ps)
	return history.Rebalance{Process: m.process, Group: m.w.cfg.Group, Member: id, Generation: gen, Partitions: ps, At: at}
}

// run polls, records, commits, and lets a rebalance through, until ctx ends.
func (m *member) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		m.pollOnce(ctx)
		m.cl.AllowRebalance()
	}
}

func (m *member) pollOnce(ctx context.Context) {
	invoke := m.w.rec.Now()
	fs := m.cl.PollRecords(ctx, maxPollRecords)
	complete := m.w.rec.Now()
	id, gen, assignedAt := m.assignment()
	// kgo may hold a poll call across a rebalance; what it returns was
	// positioned by the assignment, so the poll counts from there.
	invoke = min(max(invoke, assignedAt), complete)
	who := pollID{process: m.process, consumer: history.ConsumerGroup, group: m.w.cfg.Group, member: id, gen: gen}
	if id == "" || gen < 0 {
		if n := fs.NumRecords(); n > 0 {
			m.w.log.Error().Int("process", int(m.process)).Int("records", n).Msg("member: records polled without an assignment; not recorded")
		}
		return
	}
	got := m.w.recordPoll(ctx, m.cl, m.w.admin, fs, who, invoke, complete, nil)
	if len(got.order) > 0 {
		m.commit(ctx, got, id, gen)
	}
}

// commit commits, per partition, the offset after the last record polled,
// and records one commit event per partition.
func (m *member) commit(ctx context.Context, got polled, id string, gen history.Generation) {
	topic := m.w.cfg.Topic
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for _, p := range got.order {
		r := got.last[p]
		offsets[topic][p] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	var (
		req  *kmsg.OffsetCommitRequest
		resp *kmsg.OffsetCommitResponse
		rerr error
	)
	before := m.commitWrites.Load()
	invoke := m.w.rec.Now()
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, q *kmsg.OffsetCommitRequest, r *kmsg.OffsetCommitResponse, err error) {
		req, resp, rerr = q, r, err
	})
	complete := m.w.rec.Now()
	writes := m.commitWrites.Load() - before
	if writes > 0 && req != nil && req.MemberID != "" {
		id, gen = req.MemberID, history.Generation(req.Generation) // what the broker was told
	}
	answered := make(map[int32]int16)
	if resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				answered[p.Partition] = p.ErrorCode
			}
		}
	}
	for _, p := range got.order {
		ev := history.Commit{
			Process: m.process, Group: m.w.cfg.Group, Member: id, Generation: gen,
			Partition: history.Partition(p), Offset: history.Offset(offsets[topic][p].Offset),
			Invoke: invoke, Complete: complete,
		}
		code, ok := answered[p]
		ev.Outcome, ev.Error = commitOutcome(rerr, code, ok, writes)
		m.w.record(ev)
	}
}

// definiteCommitErrors are the errors with which a group coordinator
// rejects a commit without applying it.
var definiteCommitErrors = []*kerr.Error{
	kerr.IllegalGeneration,
	kerr.UnknownMemberID,
	kerr.RebalanceInProgress,
	kerr.FencedInstanceID,
	kerr.GroupAuthorizationFailed,
	kerr.TopicAuthorizationFailed,
	kerr.OffsetMetadataTooLarge,
	kerr.InvalidCommitOffsetSize,
	kerr.InvalidGroupID,
	kerr.StaleMemberEpoch,
}

// commitOutcome classifies one partition of a commit (the rule is in the
// package doc): reqErr is the request's error, code the partition's error
// code when the response answered it (answered), writes the OffsetCommit
// requests written for the commit. Fail needs exactly one request written:
// with more, an earlier one whose answer was lost may have been applied.
func commitOutcome(reqErr error, code int16, answered bool, writes int64) (history.Outcome, string) {
	switch {
	case reqErr != nil:
		return history.Info, reqErr.Error()
	case !answered:
		return history.Info, "partition not answered"
	case code == 0:
		return history.OK, ""
	}
	err := kerr.ErrorForCode(code)
	var ke *kerr.Error
	if writes == 1 && errors.As(err, &ke) && slices.Contains(definiteCommitErrors, ke) {
		return history.Fail, ke.Message
	}
	return history.Info, err.Error()
}

// commitCounter counts the OffsetCommit requests a client writes, failed
// writes included.
type commitCounter struct{ n *atomic.Int64 }

func (c commitCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.OffsetCommit.Int16() {
		c.n.Add(1)
	}
}

// cutDialer dials the cluster and can cut every connection it made and
// refuse new ones: to the cluster, the client has crashed.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool       // guarded by mu
	conns []net.Conn // guarded by mu
}

var errCut = errors.New("workload: client crashed (dialer cut)")

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errCut
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.conns = slices.DeleteFunc(d.conns, closedConn)
	d.conns = append(d.conns, &trackedConn{Conn: c})
	return d.conns[len(d.conns)-1], nil
}

func (d *cutDialer) cutAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

// trackedConn knows whether it was closed, so the dialer can forget it.
type trackedConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func closedConn(c net.Conn) bool { return c.(*trackedConn).closed.Load() }
