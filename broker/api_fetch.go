package broker

// Fetch (key 1): whole record batches below the high watermark, with long
// polling. A fetch waits until MinBytes are available or MaxWait passes; the
// wait is on the partitions' high-watermark notifications, not a timer loop.
// Fetch sessions are not kept: session id 0 tells clients to send full
// fetches every time.
//
// Invariant: a response holds at most min(MaxBytes, Config.FetchMaxBytes)
// record bytes, except that the first batch is returned whole, as Kafka does,
// so a batch larger than every limit can still be consumed.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// maxFetchWait bounds a long poll whatever the client asks.
const maxFetchWait = 30 * time.Second

func handleFetch(b *Broker, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.FetchRequest)
	if r.ReplicaID >= 0 {
		return b.handleReplicaFetch(ctx, req, r)
	}
	if r.SessionID != 0 {
		resp := newResponse(req).(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return done(resp), nil
	}
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		resp, bytes, waits := b.fetchOnce(req, r)
		if bytes >= int(r.MinBytes) || wait == 0 || len(waits) == 0 {
			return done(resp), nil
		}
		if !waitAny(ctx, deadline.C, waits) {
			resp, _, _ = b.fetchOnce(req, r)
			return done(resp), nil
		}
	}
}

// waitAny blocks until one channel closes (true) or the deadline or ctx
// ends (false).
func waitAny(ctx context.Context, deadline <-chan time.Time, waits []<-chan struct{}) bool {
	if len(waits) == 1 {
		select {
		case <-waits[0]:
			return true
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(waits)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, w := range waits {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}

// fetchOnce reads every requested partition once. It returns the response,
// the record bytes in it, and the high-watermark channels to wait on.
func (b *Broker) fetchOnce(req *request, r *kmsg.FetchRequest) (*kmsg.FetchResponse, int, []<-chan struct{}) {
	resp := newResponse(req).(*kmsg.FetchResponse)
	maxBytes := int(r.MaxBytes)
	if req.version < 3 || maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	// The broker's cap (fetch.max.bytes) bounds what one request allocates;
	// the first batch still comes back whole if it alone is larger.
	maxBytes = min(maxBytes, int(b.cfg.FetchMaxBytes))
	total := 0
	var waits []<-chan struct{}
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		var t *topic
		if req.version >= 13 {
			t = b.lookupTopicID(rt.TopicID)
		} else {
			t = b.lookupTopic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// librdkafka rejects a null record set; send an empty one.
			sp.RecordBatches = []byte{}
			if t == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.version >= 13 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := t.local(rp.Partition)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			budget := min(int(rp.PartitionMaxBytes), maxBytes-total)
			n, wait := b.fetchPartition(p, rp, budget, total == 0, &sp)
			total += n
			if wait != nil {
				waits = append(waits, wait)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, waits
}

// fetchPartition fills sp for one partition and returns the record bytes
// added and, when the read reached the high watermark, its change channel.
func (b *Broker) fetchPartition(p *partition, rp kmsg.FetchRequestTopicPartition, budget int, first bool, sp *kmsg.FetchResponseTopicPartition) (int, <-chan struct{}) {
	hw, wait, perr := p.position(wal.Offset(rp.FetchOffset))
	sp.HighWatermark = int64(hw)
	sp.LastStableOffset = int64(hw)
	sp.LogStartOffset = int64(p.log.StartOffset())
	if err := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.leaderEpoch()); err != nil {
		sp.ErrorCode = errorCode(err)
		return 0, nil
	}
	if perr != nil || wait != nil {
		sp.ErrorCode = errorCode(perr)
		return 0, wait
	}
	if budget <= 0 && !first {
		return 0, nil
	}
	data, readHW, err := p.read(wal.Offset(rp.FetchOffset), max(budget, 1))
	if err != nil {
		sp.ErrorCode = errorCode(err)
		if !errors.Is(err, wal.ErrOffsetOutOfRange) {
			b.logger.Error().Err(err).Str("topic", p.topic).Int32("partition", p.index).Msg("fetch read")
		}
		return 0, nil
	}
	// The read may have gone up to a newer high watermark; report the one
	// that bounds the records returned.
	sp.HighWatermark, sp.LastStableOffset = int64(readHW), int64(readHW)
	sp.RecordBatches = data
	b.m.bytesOut(p.topic, len(data))
	b.m.recordsOutN(p.topic, countRecords(data))
	return len(data), nil
}

// checkLeaderEpoch compares a client's view of the leader epoch with ours.
func checkLeaderEpoch(client int32, ours wal.Epoch) error {
	switch {
	case client < 0:
		return nil
	case client < int32(ours):
		return fmt.Errorf("leader epoch %d is older than %d: %w", client, ours, kerr.FencedLeaderEpoch)
	case client > int32(ours):
		return fmt.Errorf("leader epoch %d is newer than %d: %w", client, ours, kerr.UnknownLeaderEpoch)
	}
	return nil
}
