package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/meta"
)

// lostAnswerWriter is an OffsetWriter whose commits, while armed, reach
// etcd and are applied there, but whose answers are lost: the coordinator
// sees a timeout, as when etcd's reply does not arrive in time.
type lostAnswerWriter struct {
	coordinator.OffsetWriter
	armed atomic.Bool
}

func (w *lostAnswerWriter) CommitOffsetsIf(ctx context.Context, tenant, group string, offsets []meta.CommittedOffset, conds ...clientv3.Cmp) error {
	err := w.OffsetWriter.CommitOffsetsIf(ctx, tenant, group, offsets, conds...)
	if err == nil && w.armed.Load() {
		return fmt.Errorf("meta: commit %d offsets of group %q: the answer was lost: %w", len(offsets), group, context.DeadlineExceeded)
	}
	return err
}

// TestOffsetFetchAfterAnAmbiguousCommitIsNotBehindEtcd: a commit that etcd
// applied but whose answer was lost fails for the client; a fetch after it
// must return the offset etcd holds (or an error the client retries on),
// never silently the offset before the commit.
func TestOffsetFetchAfterAnAmbiguousCommitIsNotBehindEtcd(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	createTopic(t, testClient(t, b), "t", 1, nil)
	w := &lostAnswerWriter{}
	b.coord.WrapOffsets(func(cur coordinator.OffsetWriter) coordinator.OffsetWriter {
		w.OffsetWriter = cur
		return w
	})

	conn := dialRaw(t, b, "")
	commit := func(offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = "g", -1 // an admin commit: the group has no members
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
	fetch := func() (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group = "g"
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
