package httpapi

// This file owns the queue API's hook (queueapi: messages:fetch without a
// partition, messages:ack, messages:nack): the Backend it needs, made of
// this package's coordinator calls, reads at the leader and publish path.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// queueBackend is queueapi.Backend over a Server.
type queueBackend struct{ b *Server }

// queueFetch serves a group fetch that names no topic, partition or
// offset: the queue fetch.
func (b *Server) queueFetch(w http.ResponseWriter, r *http.Request, groupID string, req fetchRequest) {
	b.queue.Fetch(w, r, groupID, queueapi.FetchRequest{MemberID: req.MemberID, Generation: req.Generation,
		MaxBytes: b.fetchBytes(r.Context(), req.MaxBytes), WaitMs: req.WaitMs})
}

// withPauses adds the group's paused keys to its lag.
func (b *Server) withPauses(r *http.Request, groupID string, lags []groupPartitionLag) []groupPartitionLag {
	paused := b.queue.Paused(r, groupID)
	for i := range lags {
		lags[i].Paused = paused[queueapi.TP{Topic: lags[i].Topic, Partition: lags[i].Partition}]
	}
	return lags
}

func (q queueBackend) Heartbeat(groupID, memberID string, gen int32) error {
	return q.b.coord.Heartbeat(groupID, memberID, "", group.Generation(gen))
}

func (q queueBackend) Assignment(groupID, memberID string) (map[string][]int32, error) {
	d, err := q.b.coord.DescribeGroup(groupID)
	if err != nil {
		return nil, err
	}
	out := map[string][]int32{}
	for _, m := range d.Members {
		if m.ID != memberID || len(m.Assignment) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.Assignment); err != nil {
			return nil, fmt.Errorf("decode assignment of %s: %w", memberID, err)
		}
		for _, t := range a.Topics {
			name := memberTopic(groupID, t.Topic)
			out[name] = append(out[name], t.Partitions...)
		}
	}
	return out, nil
}

func (q queueBackend) Committed(ctx context.Context, groupID string, tp queueapi.TP) (int64, string, error) {
	gtp := group.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	committed, err := q.b.coord.FetchOffsets(groupID, []group.TopicPartition{gtp})
	if err != nil {
		return 0, "", err
	}
	if o, ok := committed[gtp]; ok {
		return o.Offset, o.Metadata, nil
	}
	t := q.b.LookupTopic(tp.Topic)
	if t == nil {
		return 0, "", fmt.Errorf("%w: %s", node.ErrUnknownTopic, tp.Topic)
	}
	start, err := q.b.partitionOffsetsOf(ctx, t, tp.Partition, internalOffsetsRequest{To: "earliest"})
	return start.Offset, "", err
}

func (q queueBackend) GroupOffsets(groupID string) (map[queueapi.TP]queueapi.Commit, error) {
	offs, err := q.b.coord.FetchOffsets(groupID, nil)
	out := make(map[queueapi.TP]queueapi.Commit, len(offs))
	for tp, o := range offs {
		out[queueapi.TP{Topic: tp.Topic, Partition: tp.Partition}] = queueapi.Commit{Offset: o.Offset, Metadata: o.Metadata}
	}
	return out, err
}

func (q queueBackend) Groups() []string {
	var out []string
	for _, g := range q.b.coord.ListGroups() {
		out = append(out, g.Group)
	}
	return out
}

func (q queueBackend) CommitOwn(ctx context.Context, groupID string, offsets map[queueapi.TP]queueapi.Commit) error {
	perPartition, err := q.b.coord.CommitOwn(ctx, groupID, commitsIn(offsets))
	return firstCommitError(perPartition, err)
}

func commitsIn(offsets map[queueapi.TP]queueapi.Commit) map[group.TopicPartition]coordinator.OffsetCommit {
	in := make(map[group.TopicPartition]coordinator.OffsetCommit, len(offsets))
	for tp, o := range offsets {
		in[group.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = coordinator.OffsetCommit{Offset: o.Offset, LeaderEpoch: -1, Metadata: o.Metadata}
	}
	return in
}

func firstCommitError(perPartition map[group.TopicPartition]error, err error) error {
	for tp, perr := range perPartition {
		if err == nil && perr != nil {
			err = fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, perr)
		}
	}
	return err
}

func (q queueBackend) Read(ctx context.Context, tp queueapi.TP, from int64, maxBytes int) ([]queueapi.Record, error) {
	t := q.b.LookupTopic(tp.Topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", node.ErrUnknownTopic, tp.Topic)
	}
	resp, err := q.b.readAtLeader(ctx, t, tp.Partition, from, maxBytes, 0)
	if err != nil {
		return nil, err
	}
	out := make([]queueapi.Record, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		out = append(out, queueapi.RecordOf(m))
	}
	return out, nil
}

func (q queueBackend) Commit(ctx context.Context, groupID, memberID string, gen int32, offsets map[queueapi.TP]queueapi.Commit) error {
	perPartition, err := q.b.coord.CommitOffsets(ctx, groupID, memberID, "", group.Generation(gen), commitsIn(offsets))
	return firstCommitError(perPartition, err)
}

func (q queueBackend) Produce(ctx context.Context, tp queueapi.TP, rec queueapi.Record) error {
	_, err := q.b.produceCopy(ctx, tp.Topic, tp.Partition, rec)
	return err
}

func (q queueBackend) Topic(name string) (map[string]string, int32, bool) {
	t := q.b.LookupTopic(name)
	if t == nil {
		return nil, 0, false
	}
	return t.Meta.Configs, int32(len(t.States)), true
}

func (q queueBackend) CreateTopic(ctx context.Context, name string, partitions int32) error {
	if q.b.LookupTopic(name) != nil {
		return nil
	}
	_, err := q.b.CreateTopic(ctx, name, partitions, -1, nil, false)
	if errors.Is(err, meta.ErrTopicExists) {
		return nil
	}
	return err
}

func (q queueBackend) Bounds(ctx context.Context, tp queueapi.TP) (int64, int64, error) {
	t := q.b.LookupTopic(tp.Topic)
	if t == nil {
		return 0, 0, fmt.Errorf("%w: %s", node.ErrUnknownTopic, tp.Topic)
	}
	o, err := q.b.partitionOffsetsOf(ctx, t, tp.Partition, internalOffsetsRequest{To: "latest"})
	return o.LogStart, o.HighWatermark, err
}

func (q queueBackend) Decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSON(w, r, v)
}
func (q queueBackend) WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }
func (q queueBackend) Show(r *http.Request, internal string) string {
	return scopeFrom(r.Context()).name(internal)
}

// WriteError answers the queue API's failures; its refusals are already
// *APIError (queueapi.Error is the same type).
func (q queueBackend) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	q.b.groupHTTPError(w, r, err)
}

// Routes and body names of the queue API (routes.go).
var (
	ackTopics = bodyNamesOf(func(r *queueapi.AckRequest) []*string {
		out := make([]*string, len(r.Acks))
		for i := range r.Acks {
			out[i] = &r.Acks[i].Topic
		}
		return out
	})
	keyTopic   = bodyNamesOf(func(r *queueapi.KeyRequest) []*string { return []*string{&r.Topic} })
	nackTopics = bodyNamesOf(func(r *queueapi.NackRequest) []*string {
		out := make([]*string, len(r.Nacks))
		for i := range r.Nacks {
			out[i] = &r.Nacks[i].Topic
		}
		return out
	})
)
