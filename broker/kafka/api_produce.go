package kafka

// Produce (key 0): validate each partition's record batch, hand it to the
// partition owner, and answer once the replica core releases it: acks=-1
// once a quorum of replicas (min.insync.replicas, at least a majority, the
// leader included) has fsynced it under the current leader epoch; acks=1
// once the leader alone has fsynced it (a leader change may still lose it);
// acks=0 gets no response.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/envelope"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
)

type producePending struct {
	part *kmsg.ProduceResponseTopicPartition
	res  <-chan partition.AppendResult
	p    *partition.Partition
}

func handleProduce(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.ProduceRequest)
	resp := newResponse(req).(*kmsg.ProduceResponse)

	var reqErr error
	switch {
	case req.version < 3:
		reqErr = fmt.Errorf("%w: produce v%d (message formats before v2)", node.ErrUnsupportedVersion, req.version)
	case r.Acks != -1 && r.Acks != 0 && r.Acks != 1:
		reqErr = fmt.Errorf("%w: got %d", node.ErrInvalidRequiredAcks, r.Acks)
	case r.TransactionID != nil:
		reqErr = fmt.Errorf("%w: transactions are not supported", node.ErrInvalidRecord)
	}

	var pending []producePending
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		rst := &resp.Topics[len(resp.Topics)-1]
		for i, rp := range rt.Partitions {
			sp := &rst.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			err := reqErr
			var ap *partition.AppendRequest
			var p *partition.Partition
			if err == nil {
				p, ap, err = b.prepareAppend(ctx, rt.Topic, rp.Partition, rp.Records, r.Acks == -1)
			}
			if err == nil {
				err = p.Enqueue(ap)
			}
			if err != nil {
				setProduceError(b, sp, rt.Topic, err)
				continue
			}
			b.M.RecordsIn(rt.Topic, len(rp.Records), int(ap.Header().RecordCount))
			pending = append(pending, producePending{part: sp, res: ap.Result(), p: p})
		}
	}
	if r.Acks == 0 {
		return nil, nil
	}
	pr := &produceReply{b: b, stop: ctx.Done(), resp: resp, pending: pending}
	if r.TimeoutMillis > 0 {
		pr.deadline = time.Now().Add(time.Duration(r.TimeoutMillis) * time.Millisecond)
	}
	return pr, nil
}

// produceReply completes a produce response as the partition owners answer.
// Only the connection's writer goroutine calls it.
type produceReply struct {
	b       *Server
	stop    <-chan struct{} // closed at shutdown
	resp    *kmsg.ProduceResponse
	pending []producePending
	got     int // pending[:got] are filled in
	// deadline is the request's timeout: a partition not answered by then
	// gets REQUEST_TIMED_OUT, as in Kafka (its batch may still commit
	// later; an idempotent producer's retry is then deduplicated). Zero:
	// no timeout (a request with timeout 0 waits, rather than failing at
	// once as Kafka's would).
	deadline time.Time
}

func (r *produceReply) ready() bool {
	for r.got < len(r.pending) {
		select {
		case res := <-r.pending[r.got].res:
			r.fill(res)
		default:
			return false
		}
	}
	return true
}

func (r *produceReply) response() kmsg.Response {
	var timeout <-chan time.Time
	if !r.deadline.IsZero() {
		t := time.NewTimer(time.Until(r.deadline))
		defer t.Stop()
		timeout = t.C
	}
	expired := false
	for r.got < len(r.pending) {
		var res partition.AppendResult
		if expired {
			select {
			case res = <-r.pending[r.got].res:
			default:
				res.Err = node.ErrRequestTimedOut
			}
			r.fill(res)
			continue
		}
		select {
		case res = <-r.pending[r.got].res:
		case <-r.stop:
			res.Err = node.ErrShuttingDown
		case <-timeout:
			expired = true
			continue
		}
		r.fill(res)
	}
	return r.resp
}

func (r *produceReply) fill(res partition.AppendResult) {
	pp := r.pending[r.got]
	r.got++
	if res.Err != nil {
		setProduceError(r.b, pp.part, pp.p.Topic(), res.Err)
		return
	}
	pp.part.BaseOffset = int64(res.Base)
	pp.part.LogStartOffset = int64(res.LogStart)
}

func setProduceError(b *Server, sp *kmsg.ProduceResponseTopicPartition, topic string, err error) {
	sp.ErrorCode = node.ErrorCode(err)
	sp.BaseOffset = -1
	msg := err.Error()
	sp.ErrorMessage = &msg
	sp.ErrorRecords = envelope.RecordErrors(err)
	level := b.Logger.Debug()
	if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code && !node.QuotaRefusal(err) {
		level = b.Logger.Error()
	}
	level.Err(err).Str("topic", topic).Int32("partition", sp.Partition).Int16("code", sp.ErrorCode).Msg("produce rejected")
}

// prepareAppend finds the partition and validates the batch for it.
func (b *Server) prepareAppend(ctx context.Context, topicName string, index int32, records []byte, acksAll bool) (*partition.Partition, *partition.AppendRequest, error) {
	t := b.LookupTopic(topicName)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, topicName, index)
	}
	p, err := t.Local(index)
	if err != nil {
		return nil, nil, err
	}
	if err := b.CheckAppend(topicName); err != nil {
		return nil, nil, err
	}
	h, err := node.ValidateBatch(records, t.Settings.MaxMessageBytes)
	start, claimed := b.Now(), false
	if err == nil { // max.inline.bytes and envelopes' references (issue 21)
		claimed, err = envelope.Check(ctx, b.Cfg.Refs, node.RefSite{TopicID: t.Meta.ID, Topic: topicName, Partition: index}, records, h, t.Settings.MaxInlineBytes)
	}
	if err != nil {
		return nil, nil, err
	}
	ar := partition.NewAppendRequest(records, h, acksAll)
	if claimed {
		ar.NotAfter(start.Add(envelope.AppendWithin))
	}
	return p, ar, nil
}
