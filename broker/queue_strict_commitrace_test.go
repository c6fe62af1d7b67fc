package broker

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/queue"
)

// TestStaleLaneCommitCannotUndoAnOperatorResume is the regression test of
// a race between keys:resume (or keys:skip) and a Kafka consumer that
// keeps its lane's state in its commits (the Go helper): the consumer's
// next commit was built before the operator's change, and used to bring
// the lifted pause back. Now the coordinator refuses it
// (UNSTABLE_OFFSET_COMMIT, retriable) while the operator's change stays,
// and accepts a commit that carries the operator's revision, and a plain
// Kafka client's commit as before.
func TestStaleLaneCommitCannotUndoAnOperatorResume(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "orders", 1, map[string]string{"delivery.order": "per-key-strict"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1")

	member := testClient(t, b, kgo.ConsumerGroup("shippers"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	for ctx.Err() == nil {
		if id, gen := member.GroupMetadata(); id != "" && gen > 0 {
			break
		}
		member.PollRecords(ctx, 10)
	}
	memberID, gen := member.GroupMetadata()

	paused := queue.LaneState{Committed: 0, Done: []queue.Range{{From: 1, To: 2}},
		Pauses: []queue.Pause{{Scope: queue.ScopeOf(queue.OrderPerKeyStrict, []byte("A")), First: 0, Since: time.UnixMilli(1000), Class: "transient"}}}
	commit := func(offset int64, st *queue.LaneState) int16 {
		t.Helper()
		md := "plain client metadata"
		if st != nil {
			var err error
			if md, err = queue.EncodeState(*st); err != nil {
				t.Fatal(err)
			}
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = "shippers", memberID, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = 0, offset, &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(0, &paused); code != 0 {
		t.Fatalf("the consumer's pause: %v", kerr.ErrorForCode(code))
	}
	code, body := postJSON(t, "http://"+b.Cfg.HTTPListen+"/v1/groups/shippers/keys:resume", `{"topic":"orders","partition":0,"message_key":"A"}`)
	if code != http.StatusOK || body["status"] != "resumed" {
		t.Fatalf("keys:resume: %d %v", code, body)
	}
	st := durableState(t, ctx, admin, "shippers", "orders")
	if len(st.Pauses) != 0 || st.Op != 1 {
		t.Fatalf("after keys:resume: %+v, want no pause at operator revision 1", st)
	}

	// The consumer's commit built before the resume (the helper commits
	// its lane every second).
	if code := commit(0, &paused); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("a commit from before the resume: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	if st := durableState(t, ctx, admin, "shippers", "orders"); len(st.Pauses) != 0 || st.Op != 1 {
		t.Fatalf("the stale commit brought back %+v", st)
	}
	// An operator's change from an old state is refused too (a second
	// keys:resume of the same pause finds nothing to resume).
	code, body = postJSON(t, "http://"+b.Cfg.HTTPListen+"/v1/groups/shippers/keys:resume", `{"topic":"orders","partition":0,"message_key":"A"}`)
	if code != http.StatusNotFound {
		t.Fatalf("second keys:resume: %d %v, want 404 not_paused", code, body)
	}

	// Built over the resume, the consumer's commit is accepted.
	over := queue.LaneState{Committed: 2, Op: 1}
	if code := commit(2, &over); code != 0 {
		t.Fatalf("a commit over the resume: %v", kerr.ErrorForCode(code))
	}
	if st := durableState(t, ctx, admin, "shippers", "orders"); st.Committed != 2 || st.Op != 1 || len(st.Pauses) != 0 {
		t.Fatalf("after the consumer's commit: %+v", st)
	}
	// A Kafka client that keeps no lane replaces the state, as in Kafka.
	if code := commit(3, nil); code != 0 {
		t.Fatalf("a plain client's commit: %v", kerr.ErrorForCode(code))
	}
	if st := durableState(t, ctx, admin, "shippers", "orders"); st.Committed != 3 || st.Op != 0 {
		t.Fatalf("after a plain commit: %s", fmt.Sprintf("%+v", st))
	}
}
