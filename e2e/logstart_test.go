package e2e

// The log start in replication: a follower that comes back below its
// leader's log start catches up (it restarts at the leader's log start) and
// is in sync again; DeleteRecords is served by the leader only, answered
// once every in-sync replica moved its log start, and what it deleted stays
// deleted after the leader dies.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords sends DeleteRecords for one partition to node id alone and
// returns the partition's error code and low watermark.
func (c *cluster) deleteRecords(id int32, topic string, partition int32, offset int64, timeout time.Duration) (int16, int64, error) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.requestTo(id, timeout+10*time.Second, req)
	if err != nil {
		return 0, -1, err
	}
	dr := resp.(*kmsg.DeleteRecordsResponse)
	if len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 {
		return 0, -1, fmt.Errorf("delete records answer of broker %d names %d topics", id, len(dr.Topics))
	}
	p := dr.Topics[0].Partitions[0]
	return p.ErrorCode, p.LowWatermark, nil
}

// inSync is the partition's in-sync replicas as node id reports them.
func (c *cluster) inSync(id int32, topic string, partition int32) ([]int32, error) {
	md, err := c.metadata(id)
	if err != nil {
		return nil, err
	}
	for _, mt := range md.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		for _, mp := range mt.Partitions {
			if mp.Partition == partition {
				isr := slices.Clone(mp.ISR)
				slices.Sort(isr)
				return isr, nil
			}
		}
	}
	return nil, fmt.Errorf("broker %d does not know %s/%d", id, topic, partition)
}

// valuesFrom reads node id's own copy of the partition from offset from up
// to its high watermark: record values by offset, and that high watermark.
func (c *cluster) valuesFrom(t testing.TB, id int32, topic string, partition int32, from int64) (map[int64]string, int64, error) {
	out := map[int64]string{}
	next, hw := from, int64(-1)
	for hw < 0 || next < hw {
		fp, err := c.fetchFrom(id, topic, partition, next)
		if err != nil {
			return nil, -1, err
		}
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return nil, -1, fmt.Errorf("broker %d at %d: %w", id, next, err)
		}
		hw = fp.HighWatermark
		if next >= hw {
			break
		}
		if len(fp.RecordBatches) == 0 {
			return nil, -1, fmt.Errorf("broker %d: no batches at %d below its high watermark %d", id, next, hw)
		}
		before := next
		for off, v := range batchValues(t, fp.RecordBatches) {
			if off >= from && off < hw {
				out[off] = v
			}
			next = max(next, off+1)
		}
		if next == before {
			next++ // a batch of control records only (an epoch start)
		}
	}
	return out, hw, nil
}

// TestReplicationFollowerBehindLogStart: a follower is killed, the leader
// deletes records past the follower's end (DeleteRecords), and the follower
// comes back: it can never fetch what it lacks, so it must restart its log
// at the leader's log start, catch up, hold the same records, and be in
// sync again. Before, it was answered OFFSET_MOVED_TO_TIERED_STORAGE on a
// topic that is not tiered, reopened itself in a loop, and the leader still
// counted it in sync.
//
// On a tiered topic (the default) the same holds while nothing below the
// leader's log start was uploaded: restarting at the remote end would not
// help, so the follower restarts at the leader's log start there too.
func TestReplicationFollowerBehindLogStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	for _, tiered := range []string{"false", "true"} {
		t.Run("remote.storage.enable="+tiered, func(t *testing.T) { followerBehindLogStart(t, tiered) })
	}
}

func followerBehindLogStart(t *testing.T, tiered string) {
	const topic = "behind-log-start"
	c := startCluster(t)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, clusterSize, map[string]*string{"remote.storage.enable": &tiered}, topic); err != nil {
		t.Fatalf("create %s: %v %s", topic, err, resp.ErrMessage)
	}
	c.waitLeader(topic, 0, nil, defaultTimeout)
	pi, _, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader, fs := pi.Leader, pi.followers()
	lag := fs[0]
	prod := c.manualProducer()
	acks := produceValues(t, prod, topic, 0, "before-", 50)
	c.kill(lag)
	// Two rounds, so that the records past the follower's end are not all
	// one batch with it (the follower could fetch that whole batch).
	acks = append(acks, produceValues(t, prod, topic, 0, "away-a-", 50)...)
	acks = append(acks, produceValues(t, prod, topic, 0, "away-b-", 100)...)
	hw, err := c.highWatermark(leader, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := hw - 37 // past the killed follower's end, perhaps inside a batch
	code, low, err := c.deleteRecords(leader, topic, 0, cut, 20*time.Second)
	if err != nil || code != 0 || low < cut {
		t.Fatalf("delete records below %d on the leader %d: code %d (%v), low watermark %d, %v", cut, leader, code, kerr.ErrorForCode(code), low, err)
	}
	t.Logf("leader %d, follower %d killed at about offset 50; records below %d deleted (HW %d)", leader, lag, cut, hw)

	c.restart(lag)
	acks = append(acks, produceValues(t, prod, topic, 0, "back-", 50)...)
	var want map[int64]string
	eventually(t, defaultTimeout, fmt.Sprintf("follower %d catches up from the leader's log start and is in sync", lag), func() (bool, string) {
		cur, _, err := c.partition(topic, 0)
		if err != nil {
			return false, err.Error()
		}
		ref, lhw, err := c.valuesFrom(t, cur.Leader, topic, 0, cut)
		if err != nil {
			return false, err.Error()
		}
		got, fhw, err := c.valuesFrom(t, lag, topic, 0, cut)
		if err != nil {
			return false, fmt.Sprintf("leader %d at HW %d; follower: %v", cur.Leader, lhw, err)
		}
		isr, err := c.inSync(cur.Leader, topic, 0)
		if err != nil {
			return false, err.Error()
		}
		if fhw < lhw || !slices.Contains(isr, lag) {
			return false, fmt.Sprintf("leader %d at HW %d, follower at %d; in sync %v", cur.Leader, lhw, fhw, isr)
		}
		for off, v := range ref {
			if got[off] != v {
				return false, fmt.Sprintf("offset %d: leader has %q, follower %q", off, v, got[off])
			}
		}
		want = ref
		return true, ""
	})
	if lines := c.grepLog(lag, "restarting it at the leader's log start"); len(lines) == 0 {
		t.Errorf("follower %d never logged its restart at the leader's log start", lag)
	}
	var missing []string
	for _, a := range acks {
		if a.offset >= cut && want[a.offset] != a.value {
			missing = append(missing, fmt.Sprintf("%s at %d", a.value, a.offset))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged records above the log start are not on the replicas; first: %s", len(missing), strings.Join(missing[:min(5, len(missing))], ", "))
	}
}

// TestDeleteRecordsLeaderOnlyAndReplicated: DeleteRecords sent to a
// follower is refused with NOT_LEADER_OR_FOLLOWER and changes nothing; on
// the leader it is answered only once every in-sync replica moved its log
// start (REQUEST_TIMED_OUT when one in sync cannot within the timeout), and
// once the leader dies, the new one still starts at the deleted offset.
// Before, any replica applied it alone, and after a leader change the
// records came back.
func TestDeleteRecordsLeaderOnlyAndReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills one")
	}
	const topic = "delete-records"
	c := startCluster(t)
	c.createTopic(topic, 1)
	pi, _, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader, fs := pi.Leader, pi.followers()
	prod := c.manualProducer()
	acks := produceValues(t, prod, topic, 0, "v-", 100)
	hw := c.awaitSameLogs(t, topic, 0)
	const cut = 43

	code, _, err := c.deleteRecords(fs[0], topic, 0, cut, 5*time.Second)
	if err != nil || code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("delete records on follower %d: code %d (%v), %v; want NOT_LEADER_OR_FOLLOWER", fs[0], code, kerr.ErrorForCode(code), err)
	}
	if fp, err := c.fetchFrom(fs[0], topic, 0, 0); err != nil || fp.ErrorCode != 0 {
		t.Fatalf("follower %d after a refused delete: fetch at 0: code %d, %v", fs[0], fp.ErrorCode, err)
	}

	// A follower in sync that cannot move its log start (paused) holds the
	// answer until the request's timeout.
	c.pause(fs[1])
	code, _, err = c.deleteRecords(leader, topic, 0, cut-10, 300*time.Millisecond)
	c.resume(fs[1])
	if err != nil || code != kerr.RequestTimedOut.Code {
		t.Fatalf("delete records with follower %d paused: code %d (%v), %v; want REQUEST_TIMED_OUT", fs[1], code, kerr.ErrorForCode(code), err)
	}

	code, low, err := c.deleteRecords(leader, topic, 0, cut, 20*time.Second)
	if err != nil || code != 0 || low != cut {
		t.Fatalf("delete records below %d on the leader: code %d (%v), low watermark %d, %v", cut, code, kerr.ErrorForCode(code), low, err)
	}
	// Answered: every in-sync replica has applied it.
	for _, f := range fs {
		fp, err := c.fetchFrom(f, topic, 0, cut-1)
		if err != nil || fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("follower %d right after the answer: fetch at %d: code %d, %v; want OFFSET_OUT_OF_RANGE", f, cut-1, fp.ErrorCode, err)
		}
	}

	c.kill(leader)
	next, _, _ := c.waitLeader(topic, 0, []int32{leader}, failoverTimeout)
	adm := kadm.NewClient(c.client())
	eventually(t, defaultTimeout, fmt.Sprintf("the new leader %d starts at %d", next, cut), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		o, ok := offs.Lookup(topic, 0)
		if !ok || o.Err != nil {
			return false, fmt.Sprintf("list offsets: %v", o.Err)
		}
		return o.Offset == cut, fmt.Sprintf("earliest offset %d", o.Offset)
	})
	if fp, err := c.fetchFrom(next, topic, 0, 0); err != nil || fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("new leader %d: fetch at 0: code %d, %v; want OFFSET_OUT_OF_RANGE", next, fp.ErrorCode, err)
	}
	got, _, err := c.valuesFrom(t, next, topic, 0, cut)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		if a.offset >= cut && a.offset < hw && got[a.offset] != a.value {
			t.Fatalf("new leader %d: %s acknowledged at %d, read %q", next, a.value, a.offset, got[a.offset])
		}
	}
}
