package e2e

// Real clients against three real sluiced processes (the harness of
// cluster_test.go): a franz-go consumer group whose coordinator's broker is
// killed with SIGKILL while a rebalance is in progress, and
// confluent-kafka-python (librdkafka) producing with idempotence through a
// leader kill and reading back. Figures (failover and settle times) are
// logged, never asserted; what is asserted is the contract of README.md,
// "Guarantees": no acknowledged offset commit is lost (a committed offset
// goes back only by a commit Kafka accepts: group_commits_test.go), every
// acknowledged record is consumed (at least once by the group, exactly once
// by a plain reader).
//
// Invariant: every goroutine a test here starts (producer stream, group
// members, offset sampler) is stopped and waited for before the test
// returns, and every client it opens is closed.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupFailoverTimeout bounds how long a group takes to settle on another
// broker after its coordinator is killed: the dead broker's registration
// lease must expire first (--registration-ttl, 10 s), then the members
// find the new coordinator and rejoin (heartbeats every 3 s).
const groupFailoverTimeout = 60 * time.Second

// recordStream produces keyed records prefix0, prefix1, ... at a steady
// pace (one per every) until stopped or limit records, recording each
// acknowledgement in log.
type recordStream struct {
	log  ackLog
	stop chan struct{}
	sent chan int // the number produced, once the stream ends

	stopOnce sync.Once
	n        int // set once by finish
}

func startRecordStream(prod *kgo.Client, topic, prefix string, every time.Duration, limit int) *recordStream {
	s := &recordStream{stop: make(chan struct{}), sent: make(chan int, 1)}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		n := 0
		defer func() { s.sent <- n }()
		for ; n < limit; n++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", n%97), Value: fmt.Appendf(nil, "%s%d", prefix, n)}
			prod.Produce(context.Background(), r, s.log.promise)
		}
	}()
	return s
}

// finish stops the stream (once) and returns how many records it produced.
func (s *recordStream) finish() int {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.n = <-s.sent
	})
	return s.n
}

// processedLog counts how many times group members processed each value.
type processedLog struct {
	mu     sync.Mutex
	counts map[string]int // guarded by mu
	total  int            // guarded by mu: every processing, repeats included
}

func (p *processedLog) add(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[v]++
	p.total++
}

// sizes is the number of distinct values and of processings.
func (p *processedLog) sizes() (distinct, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.counts), p.total
}

// missing lists the values of acks never processed.
func (p *processedLog) missing(acks []ack) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, a := range acks {
		if p.counts[a.value] == 0 {
			out = append(out, fmt.Sprintf("%s (%d/%d)", a.value, a.partition, a.offset))
		}
	}
	return out
}

// unknown lists the values processed that are not prefix<i> for i < n.
func (p *processedLog) unknown(prefix string, n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for v := range p.counts {
		i, err := strconv.Atoi(strings.TrimPrefix(v, prefix))
		if !strings.HasPrefix(v, prefix) || err != nil || i < 0 || i >= n {
			out = append(out, v)
		}
	}
	return out
}

// groupMember is one franz-go member of a consumer group that processes
// what it polls, then commits it (CommitUncommittedOffsets, each commit
// recorded in ledger), then allows a rebalance: with BlockRebalanceOnPoll
// it gives no partition up between processing and committing it.
type groupMember struct {
	name   string
	topic  string
	cl     *kgo.Client
	ledger *commitLog // records every commit it sends
	cancel context.CancelFunc
	done   chan struct{} // closed when the member's loop has returned
	closed sync.Once

	mu            sync.Mutex
	commits       int       // guarded by mu: successful commits
	commitErrs    int       // guarded by mu: failed commits
	lastCommitErr string    // guarded by mu
	lastFailAt    time.Time // guarded by mu: when the last commit failed
	fetchErrs     int       // guarded by mu: errors polled (group session, fetch)
	lastFetchErr  string    // guarded by mu
}

// memberCommitTimeout bounds one commit; a commit that fails is retried
// after the next poll (its records may then be processed again).
const memberCommitTimeout = 10 * time.Second

func (c *cluster) startGroupMember(t testing.TB, name, group, topic string, proc *processedLog, commits *commitLog) *groupMember {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.ClientID(name),
		kgo.RetryTimeout(30*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		t.Fatalf("member %s: kgo.NewClient: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &groupMember{name: name, topic: topic, cl: cl, ledger: commits, cancel: cancel, done: make(chan struct{})}
	go m.run(ctx, proc)
	t.Cleanup(m.close)
	return m
}

func (m *groupMember) run(ctx context.Context, proc *processedLog) {
	defer close(m.done)
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := m.cl.PollRecords(pctx, 500)
		pcancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				m.fetchError(fmt.Errorf("%s/%d: %w", topic, p, err))
			}
		})
		for _, r := range fs.Records() {
			proc.add(string(r.Value))
		}
		if ctx.Err() == nil && len(m.cl.UncommittedOffsets()) > 0 {
			var sent atomic.Pointer[commitRecord]
			cctx, ccancel := context.WithTimeout(ctx, memberCommitTimeout)
			cctx = kgo.PreCommitFnContext(cctx, func(req *kmsg.OffsetCommitRequest) error {
				sent.Store(m.ledger.sent(m.name, m.topic, req))
				return nil
			})
			err := m.cl.CommitUncommittedOffsets(cctx)
			ccancel()
			if rec := sent.Load(); rec != nil {
				m.ledger.done(rec, err)
			}
			m.commitDone(err)
		}
		m.cl.AllowRebalance()
	}
}

// commitDone counts a commit that succeeded (err nil) or failed.
func (m *groupMember) commitDone(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.commits++
		return
	}
	m.commitErrs++
	m.lastCommitErr = err.Error()
	m.lastFailAt = time.Now()
}

// fetchError remembers an error returned by a poll.
func (m *groupMember) fetchError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fetchErrs++
	m.lastFetchErr = err.Error()
}

func (m *groupMember) stats(since time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := fmt.Sprintf("%s: %d commits, %d failed", m.name, m.commits, m.commitErrs)
	if m.commitErrs > 0 {
		s += fmt.Sprintf(" (the last %v after the kill: %s)", m.lastFailAt.Sub(since).Round(time.Millisecond), m.lastCommitErr)
	}
	if m.fetchErrs > 0 {
		s += fmt.Sprintf(", %d poll errors (the last: %s)", m.fetchErrs, m.lastFetchErr)
	}
	return s
}

func memberStats(members []*groupMember, since time.Time) string {
	var out []string
	for _, m := range members {
		out = append(out, m.stats(since))
	}
	return strings.Join(out, "; ")
}

// close stops the loop, waits for it, and closes the client (which leaves
// the group). Safe to call twice.
func (m *groupMember) close() {
	m.closed.Do(func() {
		m.cancel()
		<-m.done
		m.cl.Close()
	})
}

// offsetWatch samples a group's committed offsets and keeps, per partition,
// the highest seen and the last sample; a sample below the highest is a
// drop, which the group's commits must explain (commitLog.judge).
type offsetWatch struct {
	mu       sync.Mutex
	high     map[int32]int64      // guarded by mu
	last     map[int32]lastSample // guarded by mu
	samples  int                  // guarded by mu: samples answered
	failures int                  // guarded by mu: samples that failed (no coordinator)
	lastErr  string               // guarded by mu
	drops    []offsetDrop         // guarded by mu
	advances []time.Time          // guarded by mu: when each sample that showed a higher offset was sent
	commits  *commitLog
	done     chan struct{}
}

// lastSample is the offset the last sample of a partition showed, and when
// that sample was sent.
type lastSample struct {
	offset int64
	sentAt time.Time
}

// watchCommitted samples group's committed offsets of topic every 100 ms
// with kadm.FetchOffsets through a client seeded with every broker, so
// from whichever coordinator is alive, until ctx ends; start is the time
// drops are reported from; commits are the members' commits that explain them.
//
// A failed sample closes its client and the next one starts afresh:
// franz-go (v1.22) sends OffsetFetch through its sharded path, which does
// not drop a cached coordinator it cannot dial, so one client would ask
// the killed broker for ever.
func (c *cluster) watchCommitted(ctx context.Context, group, topic string, start time.Time, commits *commitLog) *offsetWatch {
	w := &offsetWatch{high: map[int32]int64{}, last: map[int32]lastSample{}, commits: commits, done: make(chan struct{})}
	newAdmin := func() *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ClientID("sluice-e2e-offset-watch"),
			kgo.RetryTimeout(3*time.Second))
		if err != nil {
			panic(fmt.Sprintf("kgo.NewClient with static options: %v", err))
		}
		return kadm.NewClient(cl)
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		adm := newAdmin()
		defer func() { adm.Close() }()
		for {
			sentAt := time.Now()
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			resps, err := adm.FetchOffsets(sctx, group)
			cancel()
			if err == nil {
				err = resps.Error()
			}
			w.record(resps, err, topic, start, sentAt)
			if err != nil && ctx.Err() == nil {
				adm.Close()
				adm = newAdmin()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *offsetWatch) record(resps kadm.OffsetResponses, err error, topic string, start, sentAt time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failures++
		w.lastErr = err.Error()
		return
	}
	w.samples++
	advanced := false
	for p, r := range resps[topic] {
		if r.At < 0 {
			continue // nothing committed yet
		}
		high, seen := w.high[p]
		last := w.last[p]
		switch {
		case seen && r.At < high && r.At != last.offset:
			w.drops = append(w.drops, offsetDrop{partition: p, offset: r.At, high: high, prev: last.offset,
				prevSentAt: last.sentAt, answeredAt: time.Now(), sample: w.samples, intoTest: time.Since(start)})
		case !seen || r.At > high:
			w.high[p] = r.At
			advanced = true
		}
		w.last[p] = lastSample{offset: r.At, sentAt: sentAt}
	}
	if advanced {
		w.advances = append(w.advances, sentAt)
	}
}

// behind lists the partitions whose highest committed offset seen is not
// past the last of acks there.
func (w *offsetWatch) behind(acks []ack) []string {
	last := map[int32]int64{}
	for _, a := range acks {
		last[a.partition] = max(last[a.partition], a.offset)
	}
	committed := w.committed()
	var out []string
	for p, o := range last {
		if committed[p] < o+1 {
			out = append(out, fmt.Sprintf("partition %d: committed %d, last acknowledged %d", p, committed[p], o))
		}
	}
	sort.Strings(out)
	return out
}

// committed is the highest committed offset seen per partition.
func (w *offsetWatch) committed() map[int32]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]int64, len(w.high))
	for p, o := range w.high {
		out[p] = o
	}
	return out
}

// firstAdvanceAfter is when the first sample sent after t that showed a
// committed offset higher than any before was sent.
func (w *offsetWatch) firstAdvanceAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.advances {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// report is the sampling's counts and its drops, split into those the
// group's commits explain (excused) and the others (regressions).
func (w *offsetWatch) report() (samples, failures int, regressions, excused []string, lastErr string) {
	w.mu.Lock()
	drops := slices.Clone(w.drops)
	samples, failures, lastErr = w.samples, w.failures, w.lastErr
	w.mu.Unlock()
	ok, bad := w.commits.judge(drops)
	for _, d := range bad {
		regressions = append(regressions, d.String())
	}
	for _, d := range ok {
		excused = append(excused, d.String())
	}
	return samples, failures, regressions, excused, lastErr
}

// groupCoordinatorAt asks node id alone which broker coordinates group.
func (c *cluster) groupCoordinatorAt(id int32, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group            // v0-v3
	req.CoordinatorKeys = []string{group} // v4+
	resp, err := c.requestTo(id, 3*time.Second, req)
	if err != nil {
		return -1, fmt.Errorf("FindCoordinator to broker %d: %w", id, err)
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	node, code := r.NodeID, r.ErrorCode
	if len(r.Coordinators) > 0 {
		node, code = r.Coordinators[0].NodeID, r.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, fmt.Errorf("FindCoordinator to broker %d: %w", id, err)
	}
	return node, nil
}

// groupCoordinatorView is the coordinator of group every broker that is
// up names, or -1 with what each says.
func (c *cluster) groupCoordinatorView(group string) (int32, string) {
	var views []string
	coord := int32(-1)
	agree := true
	for _, id := range c.up() {
		node, err := c.groupCoordinatorAt(id, group)
		if err != nil {
			views = append(views, err.Error())
			agree = false
			continue
		}
		views = append(views, fmt.Sprintf("broker %d: %d", id, node))
		if coord >= 0 && node != coord {
			agree = false
		}
		coord = node
	}
	if !agree || !slices.Contains(c.up(), coord) {
		return -1, strings.Join(views, "; ")
	}
	return coord, strings.Join(views, "; ")
}

// groupState is a group as its coordinator describes it.
type groupState struct {
	state    string
	members  []string      // client ids
	assigned map[int32]int // partition → members it is assigned to
}

func (g groupState) String() string {
	return fmt.Sprintf("%s, members %v, partitions assigned %v", g.state, g.members, g.assigned)
}

// describeGroupAt asks node id alone to describe group.
func (c *cluster) describeGroupAt(id int32, group, topic string) (groupState, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := c.requestTo(id, 3*time.Second, req)
	if err != nil {
		return groupState{}, fmt.Errorf("DescribeGroups to broker %d: %w", id, err)
	}
	r := resp.(*kmsg.DescribeGroupsResponse)
	if len(r.Groups) != 1 {
		return groupState{}, fmt.Errorf("DescribeGroups to broker %d: %d groups in the answer", id, len(r.Groups))
	}
	g := r.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return groupState{}, fmt.Errorf("DescribeGroups to broker %d: %w", id, err)
	}
	out := groupState{state: g.State, assigned: map[int32]int{}}
	for _, m := range g.Members {
		out.members = append(out.members, m.ClientID)
		var a kmsg.ConsumerMemberAssignment
		if len(m.MemberAssignment) == 0 {
			continue
		}
		if err := a.ReadFrom(m.MemberAssignment); err != nil {
			return groupState{}, fmt.Errorf("decode %s's assignment: %w", m.ClientID, err)
		}
		for _, at := range a.Topics {
			if at.Topic != topic {
				continue
			}
			for _, p := range at.Partitions {
				out.assigned[p]++
			}
		}
	}
	sort.Strings(out.members)
	return out, nil
}

// settled reports whether g is Stable with want members and every one of
// partitions assigned to exactly one member.
func (g groupState) settled(want int, partitions int32) bool {
	if g.state != "Stable" || len(g.members) != want || len(g.assigned) != int(partitions) {
		return false
	}
	for p := range partitions {
		if g.assigned[p] != 1 {
			return false
		}
	}
	return true
}

// TestClusterGroupCoordinatorKilledDuringRebalance: three franz-go members
// consume a steady stream from six partitions (replication factor 3),
// committing after processing. A fourth member joins, and while the group
// is rebalancing (its coordinator says PreparingRebalance or
// CompletingRebalance) the coordinator's broker is killed with SIGKILL.
// The group settles on another broker, consumption and commits go on, and
// every acknowledged record is processed at least once. The committed
// offsets are sampled throughout (about ten times a second, from whichever
// broker coordinates); one may go back, but only by a commit the members
// sent and Kafka accepts (a member of the current generation commits what
// it likes): a value below the highest seen that no accepted (or unknown)
// commit could have written then is a lost commit or a stale read, and
// fails the test (group_commits_test.go). It does go back now and then:
// after the failover a member rejoins under a new member id still holding
// its old partitions, and once in the new generation commits their old
// offsets, although another member consumed them further meanwhile.
func TestClusterGroupCoordinatorKilledDuringRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills one")
	}
	const (
		topic      = "group-coord-kill"
		group      = "coord-kill-group"
		partitions = 6
		maxRecords = 40000 // the stream stops here whatever happens (80 s at its pace)
	)
	testStart := time.Now()
	c := startCluster(t)
	c.createTopic(topic, partitions)
	coord, why := c.groupCoordinatorView(group)
	if coord < 0 {
		t.Fatalf("the brokers do not agree on %s's coordinator: %s", group, why)
	}
	ctl := c.controller()
	t.Logf("group %s: coordinator broker %d (%s); controller %d", group, coord, why, ctl)

	prod := c.client(kgo.RecordDeliveryTimeout(45*time.Second), kgo.MaxBufferedRecords(1000))
	stream := startRecordStream(prod, topic, "gck-", 2*time.Millisecond, maxRecords)
	defer stream.finish()
	proc := &processedLog{counts: map[string]int{}}
	commits := &commitLog{}
	var members []*groupMember
	addMember := func() string {
		name := fmt.Sprintf("member-%d", len(members)+1)
		members = append(members, c.startGroupMember(t, name, group, topic, proc, commits))
		return name
	}
	for range 3 {
		addMember()
	}
	wctx, wcancel := context.WithCancel(context.Background())
	watch := c.watchCommitted(wctx, group, topic, testStart, commits)
	stopWatch := func() { wcancel(); <-watch.done }
	defer stopWatch()
	// Checked however the test ends: a regression is the finding even if a
	// later step fails.
	defer func() {
		_, _, regressions, excused, _ := watch.report()
		if len(excused) > 0 {
			t.Logf("%d committed offsets went back by a commit of the group's members:\n%s", len(excused), strings.Join(excused[:min(len(excused), 20)], "\n"))
		}
		if len(regressions) > 0 {
			t.Errorf("%d committed offsets went back with no commit that could have written them:\n%s", len(regressions), strings.Join(regressions[:min(len(regressions), 20)], "\n"))
		}
	}()

	eventually(t, defaultTimeout, "three members stable on the coordinator, commits on every partition", func() (bool, string) {
		g, err := c.describeGroupAt(coord, group, topic)
		if err != nil {
			return false, err.Error()
		}
		committed := watch.committed()
		return g.settled(3, partitions) && len(committed) == partitions, fmt.Sprintf("group %v; committed %v", g, committed)
	})
	killedAt := c.killCoordinatorMidRebalance(t, coord, ctl, group, topic, partitions, addMember)
	distinctAtKill, _ := proc.sizes()
	settledAt := c.awaitGroupSettled(t, group, topic, partitions, len(members), coord, killedAt)

	eventually(t, defaultTimeout, "records processed and offsets committed after the group settled", func() (bool, string) {
		distinct, _ := proc.sizes()
		_, advanced := watch.firstAdvanceAfter(settledAt)
		samples, failures, _, _, lastErr := watch.report()
		return distinct >= distinctAtKill+500 && advanced,
			fmt.Sprintf("%d distinct values processed (%d at the kill); a commit seen since settling: %v (committed %v; %d samples, %d failed, last error %q); %s",
				distinct, distinctAtKill, advanced, watch.committed(), samples, failures, lastErr, memberStats(members, killedAt))
	})
	if at, ok := watch.firstAdvanceAfter(killedAt); ok {
		t.Logf("first committed offset advance seen by a sample sent %v after the kill", at.Sub(killedAt).Round(time.Millisecond))
	}

	n := stream.finish()
	fctx, fcancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer fcancel()
	if err := prod.Flush(fctx); err != nil {
		t.Fatalf("flush the producer: %v", err)
	}
	acks, failed := stream.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d of %d records failed to produce; first: %v", len(failed), n, failed[0])
	}
	eventually(t, defaultTimeout, "every acknowledged record processed and committed", func() (bool, string) {
		miss, behind := proc.missing(acks), watch.behind(acks)
		return len(miss) == 0 && len(behind) == 0,
			fmt.Sprintf("%d acknowledged records not processed (first %v); %v", len(miss), miss[:min(len(miss), 5)], behind)
	})
	for _, m := range members {
		m.close()
	}
	stopWatch()
	samples, failures, _, _, lastErr := watch.report()
	distinct, total := proc.sizes()
	t.Logf("%d records produced, %d acknowledged; %d distinct values processed, %d processings (%d repeats); members: %s",
		n, len(acks), distinct, total, total-distinct, memberStats(members, killedAt))
	t.Logf("committed offsets sampled %d times (%d samples failed, the last: %s); final %v; test ran %v",
		samples, failures, lastErr, watch.committed(), time.Since(testStart).Round(time.Millisecond))
	if unknown := proc.unknown("gck-", n); len(unknown) > 0 {
		t.Errorf("%d values processed that were never produced, e.g. %v", len(unknown), unknown[:min(len(unknown), 5)])
	}
}

// killCoordinatorMidRebalance has a member join (addMember) and kills
// coord with SIGKILL once coord describes the group as rebalancing; the
// coordinator parks the newcomer's JoinGroup until the others rejoin on
// their next heartbeat (every 3 s), so that lasts a while. Should the
// polling miss it anyway, another member joins (three tries). It returns
// when the broker was gone.
func (c *cluster) killCoordinatorMidRebalance(t testing.TB, coord, ctl int32, group, topic string, partitions int32, addMember func() string) time.Time {
	t.Helper()
	for attempt := 1; attempt <= 3; attempt++ {
		joinedAt := time.Now()
		name := addMember()
		var killedAt time.Time
		eventually(t, defaultTimeout, name+" joining: the group rebalances or settles", func() (bool, string) {
			g, err := c.describeGroupAt(coord, group, topic)
			if err != nil {
				return false, err.Error()
			}
			if g.state == "PreparingRebalance" || g.state == "CompletingRebalance" {
				c.kill(coord)
				killedAt = time.Now()
				t.Logf("%s started %v before; broker %d (the coordinator%s) killed with the group %v",
					name, killedAt.Sub(joinedAt).Round(time.Millisecond), coord,
					map[bool]string{true: " and the controller", false: ""}[coord == ctl], g)
				return true, ""
			}
			if g.settled(len(g.members), partitions) && slices.Contains(g.members, name) {
				t.Logf("try %d: the rebalance for %s was over before it was seen (%v); another member joins", attempt, name, g)
				return true, ""
			}
			return false, g.String()
		})
		if !killedAt.IsZero() {
			return killedAt
		}
	}
	t.Fatalf("the group was never seen rebalancing in 3 tries")
	return time.Time{}
}

// awaitGroupSettled waits until every live broker names a coordinator of
// group other than old, and that broker describes the group Stable with
// members members and every partition assigned once; it logs how long each
// took since killedAt and the group's states on the new coordinator.
func (c *cluster) awaitGroupSettled(t testing.TB, group, topic string, partitions int32, members int, old int32, killedAt time.Time) time.Time {
	t.Helper()
	var agreedAt time.Time
	var coord int32
	var last groupState
	var timeline []string // the group's states on the new coordinator, as they change
	eventually(t, groupFailoverTimeout, "the group settles on another broker", func() (bool, string) {
		co, why := c.groupCoordinatorView(group)
		if co < 0 || co == old {
			return false, "coordinator: " + why
		}
		if agreedAt.IsZero() {
			agreedAt = time.Now()
		}
		g, err := c.describeGroupAt(co, group, topic)
		if err != nil {
			return false, err.Error()
		}
		seen := fmt.Sprintf("%s with %d members", g.state, len(g.members))
		if len(timeline) == 0 || !strings.HasSuffix(timeline[len(timeline)-1], " "+seen) {
			timeline = append(timeline, fmt.Sprintf("%v %s", time.Since(killedAt).Round(100*time.Millisecond), seen))
		}
		coord, last = co, g
		return g.settled(members, partitions), fmt.Sprintf("broker %d: %v", co, g)
	})
	settledAt := time.Now()
	t.Logf("group coordinator: broker %d named by every live broker %v after the kill; the group Stable there %v after the kill: %v",
		coord, agreedAt.Sub(killedAt).Round(time.Millisecond), settledAt.Sub(killedAt).Round(time.Millisecond), last)
	t.Logf("the group on broker %d, time since the kill: %s", coord, strings.Join(timeline, "; "))
	return settledAt
}

// confluentProduce is what confluent_cluster.py's produce phase reported.
type confluentProduce struct {
	delivered map[string][2]int64 // value → partition, offset
	failed    map[string]string   // value → error
	errs      []string            // client-level errors
	done      string              // the DONE line
}

func parseConfluentProduce(t testing.TB, lines []string) confluentProduce {
	t.Helper()
	out := confluentProduce{delivered: map[string][2]int64{}, failed: map[string]string{}}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "DELIVERED":
			if len(f) != 4 {
				t.Fatalf("bad line from confluent_cluster.py: %q", l)
			}
			p, err1 := strconv.ParseInt(f[1], 10, 32)
			o, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line from confluent_cluster.py: %q", l)
			}
			if prev, dup := out.delivered[f[3]]; dup {
				t.Errorf("%s has two delivery reports: %d/%d and %d/%d", f[3], prev[0], prev[1], p, o)
			}
			out.delivered[f[3]] = [2]int64{p, o}
		case "FAILED":
			if len(f) < 3 {
				t.Fatalf("bad line from confluent_cluster.py: %q", l)
			}
			out.failed[f[1]] = strings.Join(f[2:], " ")
		case "ERROR":
			out.errs = append(out.errs, strings.Join(f[1:], " "))
		case "DONE":
			out.done = l
		}
	}
	return out
}

// deliveredOn counts the delivery reports of partition p among lines.
func deliveredOn(lines []string, p int) int {
	prefix := fmt.Sprintf("DELIVERED %d ", p)
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// valueIndex is i of the value "cc-<i>".
func valueIndex(v string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(v, "cc-"))
	if err != nil || !strings.HasPrefix(v, "cc-") {
		return -1
	}
	return i
}

// TestClusterConfluentPython: confluent-kafka-python (librdkafka) with
// enable.idempotence and acks=all produces keyed records to a
// replication-factor-3 topic through the three-broker bootstrap list; the
// leader of partition 0 is killed with SIGKILL mid-stream. Every record
// gets a delivery report (OK, or an error), and a confluent-kafka consumer
// reads every acknowledged record back exactly once, at its acknowledged
// offset, with its key, in produced order per partition.
func TestClusterConfluentPython(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills one")
	}
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		requireCI(t, python+" with confluent_kafka", fmt.Errorf("%w: %s", err, out))
	}
	const (
		topic      = "confluent-cluster"
		partitions = 3
		count      = 3000 // one per 2 ms: about 6 s of stream
		killAfter  = 300  // deliveries on partition 0 before the kill
		script     = "testdata/confluent_cluster.py"
	)
	testStart := time.Now()
	c := startCluster(t)
	c.createTopic(topic, partitions)
	p0, _, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := p0.Leader
	bootstrap := strings.Join(c.seeds(), ",")
	t.Logf("partition 0: leader %d epoch %d replicas %v; bootstrap %s", old, p0.Epoch, p0.Replicas, bootstrap)

	prod := startLineProc(t, "confluent_cluster.py produce", python, script, "produce",
		"--bootstrap", bootstrap, "--topic", topic, "--count", strconv.Itoa(count), "--interval-ms", "2")
	eventually(t, defaultTimeout, fmt.Sprintf("%d records delivered on partition 0", killAfter), func() (bool, string) {
		lines := prod.output()
		if prod.exited() {
			t.Fatalf("confluent_cluster.py produce exited early (%v): %s", prod.waitErr, lastN(strings.Join(lines, "\n"), 2000))
		}
		n := deliveredOn(lines, 0)
		return n >= killAfter, fmt.Sprintf("%d delivered on partition 0, %d lines", n, len(lines))
	})
	atKill := prod.output()
	sentAtKill := 0
	for _, l := range atKill {
		if f := strings.Fields(l); len(f) == 2 && (f[0] == "SENT" || f[0] == "ALLSENT") {
			sentAtKill, _ = strconv.Atoi(f[1])
		}
	}
	ctl := c.controller()
	killedAt := time.Now()
	c.kill(old)
	t.Logf("broker %d (leader of partition 0%s) killed after %d records handed to librdkafka, %d delivered on partition 0",
		old, map[bool]string{true: ", and the controller", false: ""}[old == ctl], sentAtKill, deliveredOn(atKill, 0))
	if sentAtKill >= count {
		t.Errorf("the script had handed over all %d records before the kill: the kill was not mid-stream", count)
	}
	leader, epoch, took := c.waitLeader(topic, 0, []int32{old}, failoverTimeout)
	t.Logf("broker %d leads partition 0 at epoch %d (was %d) %v after the kill (seen in Metadata)",
		leader, epoch, p0.Epoch, took.Round(time.Millisecond))
	var firstAfter time.Duration
	eventually(t, defaultTimeout, "librdkafka delivers on partition 0 again after the kill", func() (bool, string) {
		n := deliveredOn(prod.output()[len(atKill):], 0)
		if n > 0 && firstAfter == 0 {
			firstAfter = time.Since(killedAt)
		}
		return n > 0, fmt.Sprintf("%d delivered on partition 0 since the kill", n)
	})
	t.Logf("first delivery report on partition 0 after the kill seen %v after it", firstAfter.Round(time.Millisecond))

	select {
	case <-prod.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("confluent_cluster.py produce still running 2 min after the kill")
	}
	if prod.waitErr != nil {
		t.Fatalf("confluent_cluster.py produce: %v", prod.waitErr)
	}
	rep := parseConfluentProduce(t, prod.output())
	checkConfluentProduce(t, rep, count)
	until := rep.until(partitions)

	out := runTool(t, 2*time.Minute, "", python, script, "consume",
		"--bootstrap", bootstrap, "--topic", topic, "--until", until, "--timeout", "60")
	checkConfluentReadBack(t, rep, strings.Split(strings.TrimSpace(out), "\n"))
	t.Logf("test ran %v", time.Since(testStart).Round(time.Millisecond))
}

// checkConfluentProduce checks that every one of count records got a
// delivery report, OK or an error, and that librdkafka reported no fatal
// error (one would mean the idempotent producer saw its sequence broken).
func checkConfluentProduce(t testing.TB, rep confluentProduce, count int) {
	t.Helper()
	t.Logf("producer: %s; %d client errors %v", rep.done, len(rep.errs), rep.errs[:min(len(rep.errs), 3)])
	if want := fmt.Sprintf("DONE delivered=%d failed=%d undelivered=0", len(rep.delivered), len(rep.failed)); rep.done != want {
		t.Errorf("producer ended with %q, want %q: every record must have a delivery report", rep.done, want)
	}
	if len(rep.delivered)+len(rep.failed) != count {
		t.Errorf("%d delivered + %d failed reports for %d records", len(rep.delivered), len(rep.failed), count)
	}
	var failed []string
	for v, e := range rep.failed {
		failed = append(failed, v+": "+e)
		if strings.Contains(e, "fatal=1") {
			t.Errorf("%s failed with a fatal error: %s", v, e)
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		t.Logf("%d records failed with an error report; first: %v", len(failed), failed[:min(len(failed), 5)])
	}
	for _, e := range rep.errs {
		if strings.Contains(e, "fatal=1") {
			t.Errorf("librdkafka reported a fatal producer error: %s", e)
		}
	}
}

// until is the consume phase's --until: the last acknowledged offset of
// each partition (-1 where none was).
func (rep confluentProduce) until(partitions int64) string {
	last := map[int64]int64{}
	for p := range partitions {
		last[p] = -1
	}
	for _, po := range rep.delivered {
		last[po[0]] = max(last[po[0]], po[1])
	}
	var out []string
	for p := range partitions {
		out = append(out, fmt.Sprintf("%d:%d", p, last[p]))
	}
	return strings.Join(out, ",")
}

// checkConfluentReadBack checks the consume phase's lines against the
// produce phase's reports: each acknowledged value read once at its
// offset, with its key; no value read twice; a failed value at most once;
// nothing else read; per partition, values in produced order.
func checkConfluentReadBack(t testing.TB, rep confluentProduce, lines []string) {
	t.Helper()
	type read struct {
		p, o int64
		key  string
	}
	got := map[string][]read{}
	byPartition := map[int64][]read{}
	values := map[int64]map[int64]string{}
	var errs []string
	done := ""
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "MSG":
			if len(f) != 5 {
				t.Fatalf("bad line from confluent_cluster.py consume: %q", l)
			}
			p, err1 := strconv.ParseInt(f[1], 10, 32)
			o, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line from confluent_cluster.py consume: %q", l)
			}
			r := read{p, o, f[4]}
			got[f[3]] = append(got[f[3]], r)
			byPartition[p] = append(byPartition[p], r)
			if values[p] == nil {
				values[p] = map[int64]string{}
			}
			values[p][o] = f[3]
		case "ERROR":
			errs = append(errs, strings.Join(f[1:], " "))
		case "DONE", "TIMEOUT":
			done = l
		}
	}
	t.Logf("consumer: %s; %d values read; %d consumer errors %v", done, len(got), len(errs), errs[:min(len(errs), 5)])
	if !strings.HasPrefix(done, "DONE") {
		t.Errorf("the consumer did not reach the end of every partition: %q", done)
	}
	var bad []string
	for v, po := range rep.delivered {
		rs := got[v]
		switch {
		case len(rs) == 0:
			bad = append(bad, fmt.Sprintf("%s acknowledged at %d/%d, not read", v, po[0], po[1]))
		case len(rs) > 1:
			bad = append(bad, fmt.Sprintf("%s acknowledged at %d/%d, read %d times: %v", v, po[0], po[1], len(rs), rs))
		case rs[0].p != po[0] || rs[0].o != po[1]:
			bad = append(bad, fmt.Sprintf("%s acknowledged at %d/%d, read at %d/%d", v, po[0], po[1], rs[0].p, rs[0].o))
		case rs[0].key != fmt.Sprintf("key-%d", valueIndex(v)%37):
			bad = append(bad, fmt.Sprintf("%s read with key %s", v, rs[0].key))
		}
	}
	for v, rs := range got {
		if _, ok := rep.delivered[v]; ok {
			continue
		}
		if _, ok := rep.failed[v]; !ok {
			bad = append(bad, fmt.Sprintf("%s read at %v but never produced", v, rs))
		} else if len(rs) > 1 {
			bad = append(bad, fmt.Sprintf("%s (failed: %s) read %d times: %v", v, rep.failed[v], len(rs), rs))
		}
	}
	for p, rs := range byPartition {
		for i := 1; i < len(rs); i++ {
			a, b := values[p][rs[i-1].o], values[p][rs[i].o]
			if rs[i].o <= rs[i-1].o || valueIndex(b) <= valueIndex(a) {
				bad = append(bad, fmt.Sprintf("partition %d: %s at %d then %s at %d: not in produced order", p, a, rs[i-1].o, b, rs[i].o))
				break
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d read-back problems (%d acknowledged, %d failed); first ones:\n%s",
			len(bad), len(rep.delivered), len(rep.failed), strings.Join(bad[:min(len(bad), 15)], "\n"))
	}
}
