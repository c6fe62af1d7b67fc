package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/meta"
)

// faultyOffsetWriter is an OffsetWriter whose next commit try, once armed,
// fails with a timeout: with lose, after etcd applied it (its answer was
// lost); without, before it reached etcd (a proposal raft dropped while
// etcd's leader moved). Later tries go through.
type faultyOffsetWriter struct {
	coordinator.OffsetWriter
	armed atomic.Bool
	lose  bool
	tries atomic.Int32

	armedGen atomic.Bool
	genTries atomic.Int32
}

func (w *faultyOffsetWriter) CommitOffsetsFenced(ctx context.Context, tenant, group string, offsets []meta.CommittedOffset,
	rev int64, token string, conds ...clientv3.Cmp) (int64, error) {
	w.tries.Add(1)
	if !w.armed.CompareAndSwap(true, false) {
		return w.OffsetWriter.CommitOffsetsFenced(ctx, tenant, group, offsets, rev, token, conds...)
	}
	if !w.lose {
		return 0, fmt.Errorf("meta: commit %d offsets of group %q: etcdserver: request timed out: %w", len(offsets), group, context.DeadlineExceeded)
	}
	if _, err := w.OffsetWriter.CommitOffsetsFenced(ctx, tenant, group, offsets, rev, token, conds...); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("meta: commit %d offsets of group %q: the answer was lost: %w", len(offsets), group, context.DeadlineExceeded)
}

// SaveGroupGenerationFenced fails its next try, once armedGen, with a
// timeout after etcd applied it (its answer lost).
func (w *faultyOffsetWriter) SaveGroupGenerationFenced(ctx context.Context, c meta.GroupClaim, gen int32, rev int64, token string) (int64, error) {
	w.genTries.Add(1)
	rev, err := w.OffsetWriter.SaveGroupGenerationFenced(ctx, c, gen, rev, token)
	if err == nil && w.armedGen.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("meta: save generation %d of group %q: the answer was lost: %w", gen, c.Group, context.DeadlineExceeded)
	}
	return rev, err
}

// TestGenerationSaveOfUnknownOutcomeIsRetriedFenced: a member's join whose
// generation save timed out once (applied, answer lost) is completed after
// a fenced retry, without the coordinator giving up the group (the old
// coordinator released it: every member rejoined).
func TestGenerationSaveOfUnknownOutcomeIsRetriedFenced(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	createTopic(t, testClient(t, b), "t", 1, nil)
	w := &faultyOffsetWriter{}
	b.coord.WrapOffsets(func(cur coordinator.OffsetWriter) coordinator.OffsetWriter {
		w.OffsetWriter = cur
		return w
	})
	conn := dialRaw(t, b, "")
	if code := adminCommit(conn, "g", 0); code != 0 { // the group exists, claimed
		t.Fatalf("commit: code %d", code)
	}
	claim, _, ok := b.coord.GroupState("g")
	if !ok {
		t.Fatal("group g not held after a commit")
	}
	w.armedGen.Store(true)
	cl := testClient(t, b, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	brokertest.EventuallyWhy(t, 20*time.Second, "the member joined at generation 1", func() (bool, string) {
		d, err := kadm.NewClient(cl).DescribeGroups(context.Background(), "g")
		if err != nil {
			return false, err.Error()
		}
		g := d["g"]
		_, gen, _ := b.coord.GroupState("g")
		return g.State == "Stable" && len(g.Members) == 1 && gen == 1, fmt.Sprintf("state %s, %d members, generation %d", g.State, len(g.Members), gen)
	})
	if n := w.genTries.Load(); n != 2 {
		t.Fatalf("generation saves: %d tries, want 2 (one lost, one recognised)", n)
	}
	if again, _, ok := b.coord.GroupState("g"); !ok || again.Revision != claim.Revision {
		t.Fatalf("claim after the retried generation save: %+v (held %v), want revision %d kept", again, ok, claim.Revision)
	}
	if gen, err := b.Store.GroupGeneration(context.Background(), meta.DefaultTenant, "g"); err != nil || gen != 1 {
		t.Fatalf("stored generation %d, %v; want 1", gen, err)
	}
}

// TestOffsetCommitOfUnknownOutcomeIsRetriedFenced: a commit whose etcd
// write timed out once, applied (answer lost) or not (proposal dropped),
// is tried again under the group's commit fence and succeeds for the
// client, without the coordinator giving up the group (same claim, same
// generation: the members need not rejoin); etcd and a fetch then hold the
// commit, and etcd holds it once. The old coordinator released the group
// after any such failure (issue 23: a 7 s consumer stall during a rolling
// restart when etcd's leader stopped).
func TestOffsetCommitOfUnknownOutcomeIsRetriedFenced(t *testing.T) {
	for _, lose := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", lose), func(t *testing.T) {
			b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
			createTopic(t, testClient(t, b), "t", 1, nil)
			w := &faultyOffsetWriter{lose: lose}
			b.coord.WrapOffsets(func(cur coordinator.OffsetWriter) coordinator.OffsetWriter {
				w.OffsetWriter = cur
				return w
			})
			conn := dialRaw(t, b, "")
			if code := adminCommit(conn, "g", 5); code != 0 {
				t.Fatalf("commit 5: code %d", code)
			}
			claim, _, ok := b.coord.GroupState("g")
			if !ok {
				t.Fatal("group g not held after a commit")
			}
			rev, err := b.Store.GroupCommitRevision(context.Background(), meta.DefaultTenant, "g")
			if err != nil {
				t.Fatal(err)
			}
			w.armed.Store(true)
			w.tries.Store(0)
			if code := adminCommit(conn, "g", 9); code != 0 {
				t.Fatalf("commit 9 after one try of unknown outcome: code %d, want 0 (tried again, fenced)", code)
			}
			if n := w.tries.Load(); n != 2 {
				t.Fatalf("commit 9 took %d tries, want 2", n)
			}
			if again, _, ok := b.coord.GroupState("g"); !ok || again.Revision != claim.Revision {
				t.Fatalf("claim after the retried commit: %+v (held %v), want revision %d kept", again, ok, claim.Revision)
			}
			stored, err := b.Store.GroupOffsets(context.Background(), meta.DefaultTenant, "g")
			if err != nil || len(stored) != 1 || stored[0].Offset != 9 {
				t.Fatalf("etcd after the retried commit: %+v %v, want offset 9", stored, err)
			}
			// One transaction stored it: the commit key moved once.
			after, err := b.Store.GroupCommitRevision(context.Background(), meta.DefaultTenant, "g")
			if err != nil || after <= rev {
				t.Fatalf("commit revision %d -> %d, %v", rev, after, err)
			}
			if off, code := adminFetch(conn, "g"); code != 0 || off != 9 {
				t.Fatalf("fetch after the retried commit: offset %d, code %d, want 9", off, code)
			}
			// The coordinator's commit revision followed: the next commit lands at once.
			w.tries.Store(0)
			if code := adminCommit(conn, "g", 12); code != 0 || w.tries.Load() != 1 {
				t.Fatalf("commit 12: code %d in %d tries, want 0 in 1", code, w.tries.Load())
			}
		})
	}
}

// adminCommit commits offset for partition 0 of topic t as an admin (the
// group has no members) and returns the partition's error code.
func adminCommit(conn *rawConn, groupID string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = groupID, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.SetVersion(8)
	conn.roundTrip(req, resp)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// adminFetch fetches the committed offset of partition 0 of topic t.
func adminFetch(conn *rawConn, groupID string) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.SetVersion(7)
	conn.roundTrip(req, resp)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// lostAnswerWriter is an OffsetWriter whose commits, while armed, reach
// etcd and are applied there, but whose answers are all lost: every try
// of the coordinator sees a timeout, as when etcd's replies do not arrive.
type lostAnswerWriter struct {
	coordinator.OffsetWriter
	armed atomic.Bool
}

func (w *lostAnswerWriter) CommitOffsetsFenced(ctx context.Context, tenant, group string, offsets []meta.CommittedOffset,
	rev int64, token string, conds ...clientv3.Cmp) (int64, error) {
	rev, err := w.OffsetWriter.CommitOffsetsFenced(ctx, tenant, group, offsets, rev, token, conds...)
	if err == nil && w.armed.Load() {
		return 0, fmt.Errorf("meta: commit %d offsets of group %q: the answer was lost: %w", len(offsets), group, context.DeadlineExceeded)
	}
	return rev, err
}

// TestOffsetFetchAfterAnAmbiguousCommitIsNotBehindEtcd: a commit that etcd
// applied but whose answer was lost on every try within the coordinator's
// bound fails for the client; a fetch after it must return the offset etcd
// holds (or an error the client retries on), never silently the offset
// before the commit.
func TestOffsetFetchAfterAnAmbiguousCommitIsNotBehindEtcd(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	createTopic(t, testClient(t, b), "t", 1, nil)
	w := &lostAnswerWriter{}
	b.coord.WrapOffsets(func(cur coordinator.OffsetWriter) coordinator.OffsetWriter {
		w.OffsetWriter = cur
		return w
	})

	conn := dialRaw(t, b, "")
	commit := func(offset int64) int16 { return adminCommit(conn, "g", offset) }
	fetch := func() (int64, int16) { return adminFetch(conn, "g") }

	if code := commit(5); code != 0 {
		t.Fatalf("commit 5: code %d", code)
	}
	w.armed.Store(true)
	code := commit(9)
	w.armed.Store(false)
	if code == 0 {
		t.Fatal("a commit whose answer was lost succeeded")
	}
	stored, err := b.Store.GroupOffsets(context.Background(), meta.DefaultTenant, "g")
	if err != nil || len(stored) != 1 || stored[0].Offset != 9 {
		t.Fatalf("etcd after the lost answer: %+v %v, want offset 9 (the double applies the commit)", stored, err)
	}
	off, code := fetch()
	switch {
	case code == 0 && off == 9:
	case code == kerr.CoordinatorNotAvailable.Code || code == kerr.NotCoordinator.Code || code == kerr.CoordinatorLoadInProgress.Code:
		// The client finds the coordinator again and retries; the retry
		// must then see etcd's offset.
		first := code
		if off, code = fetch(); code != 0 || off != 9 {
			t.Fatalf("fetch retried after code %d: offset %d, code %d, want 9", first, off, code)
		}
	default:
		t.Fatalf("fetch after an ambiguous commit: offset %d, code %d; etcd holds 9", off, code)
	}
}
