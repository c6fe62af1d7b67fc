package coordinator

// This file owns committed offsets on the coordinator side: commits
// (checked by the group state machine, then written to etcd in one
// transaction fenced by this broker's claim on the group, then applied in
// memory), fetches, admin resets, deletes and expiry. Loading a group's
// offsets when this broker takes it over is group_placement.go's acquire.
//
// Invariant: an offset is in a group's memory only after it is durable in
// etcd, and it is checked and written under the group's lock, so a member
// whose generation ended cannot commit.
// Invariant: a committed offset is returned only while its topic still has
// the topic ID it was committed under.
// Invariant: every etcd write here is conditioned on the group's claim
// (gr.claimCond); a refused one releases the group (NOT_COORDINATOR).
// Invariant: a commit (and a generation save, coordinator.go's deliver) is
// fenced by the group's commit key too (meta.CommitOffsetsFenced at
// gr.commitRev; retryFenced), so a try whose outcome is
// unknown (a timeout, a lost answer: as when etcd's leader moves and drops
// a proposal, which etcd answers only after its own ~7 s request timeout)
// is tried again with the same token, each try bounded by
// commitTryTimeout, until etcd says whether it is stored; no older try can
// land after a newer commit. Only when that fails within etcdTimeout is
// the outcome left unknown.
// Invariant: a commit or delete whose outcome stays unknown releases the
// group (COORDINATOR_NOT_AVAILABLE): its memory may be behind etcd, so it
// answers no fetch until the group is claimed and its offsets loaded from
// etcd again.
//
// The writes go through OffsetWriter, the store's half this file uses
// (c.offsets, meta.Store in a running broker).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
	"github.com/sluice-mq/sluice/wal"
)

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// commitTryTimeout bounds one try of an offset commit's etcd write, well
// under etcd's own request timeout (5 s plus two election timeouts), which
// is how long a proposal raft dropped during a leader change keeps its
// request waiting; commitRetryBackoff is the first pause before another try
// (doubling, at most commitTryTimeout/2).
const (
	commitTryTimeout   = 1500 * time.Millisecond
	commitRetryBackoff = 50 * time.Millisecond
)

// OffsetWriter writes a group's committed offsets and generation in etcd,
// each transaction conditioned on the group's claim: meta.Store's methods
// of those names.
type OffsetWriter interface {
	CommitOffsetsFenced(ctx context.Context, tenant, group string, offsets []meta.CommittedOffset, rev int64, token string, conds ...clientv3.Cmp) (int64, error)
	DeleteOffsetsIf(ctx context.Context, tenant, group string, keys []meta.OffsetKey, conds ...clientv3.Cmp) error
	SaveGroupGenerationFenced(ctx context.Context, c meta.GroupClaim, gen int32, rev int64, token string) (int64, error)
}

// OffsetCommit is one partition's commit.
type OffsetCommit struct {
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
}

// CommitOffsets commits offsets for a member (memberID, instanceID, gen) or,
// with gen < 0 and no member, as an admin while the group is Empty. The
// error is for the whole request; the map holds per-partition errors (an
// unknown topic or partition, metadata too large) for partitions not written.
func (c *Coordinator) CommitOffsets(ctx context.Context, groupID, memberID, instanceID string, gen group.Generation,
	offsets map[group.TopicPartition]OffsetCommit) (map[group.TopicPartition]error, error) {
	admin := gen < 0 && memberID == "" && instanceID == ""
	perPartition := make(map[group.TopicPartition]error)
	err := c.locked(ctx, groupID, admin, func(gr *groupRunner) error {
		now := c.now()
		if err := gr.g.CheckCommit(now, memberID, instanceID, gen); err != nil {
			return err
		}
		return c.writeOffsets(ctx, gr, gen, false, offsets, perPartition)
	})
	if errors.Is(err, node.ErrGroupNotFound) {
		err = fmt.Errorf("%w: %w", group.ErrIllegalGeneration, err)
	}
	return perPartition, err
}

// CommitOwn commits offsets as the coordinator itself, with no member
// check: the queue API's keys:resume and keys:skip, which an operator asks
// for while the group's members run. The group must exist; the claim
// fences the write like any commit.
func (c *Coordinator) CommitOwn(ctx context.Context, groupID string, offsets map[group.TopicPartition]OffsetCommit) (map[group.TopicPartition]error, error) {
	perPartition := make(map[group.TopicPartition]error)
	err := c.locked(ctx, groupID, false, func(gr *groupRunner) error {
		return c.writeOffsets(ctx, gr, -1, true, offsets, perPartition)
	})
	return perPartition, err
}

// writeOffsets validates, writes and applies offsets; gr.mu is held. own
// marks the operator's commits (CommitOwn): a queue lane's state must
// follow the committed one's operator revision (queue.CheckCommit).
func (c *Coordinator) writeOffsets(ctx context.Context, gr *groupRunner, gen group.Generation, own bool,
	offsets map[group.TopicPartition]OffsetCommit, perPartition map[group.TopicPartition]error) error {
	now := c.now()
	durable := make([]meta.CommittedOffset, 0, len(offsets))
	apply := make(map[group.TopicPartition]group.Offset, len(offsets))
	for tp, o := range offsets {
		t := c.node.LookupTopic(tp.Topic)
		switch {
		case t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.States):
			perPartition[tp] = fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, tp.Topic, tp.Partition)
			continue
		case len(o.Metadata) > maxOffsetMetadata:
			perPartition[tp] = fmt.Errorf("%w: %d bytes", node.ErrOffsetMetadataTooLarge, len(o.Metadata))
			continue
		}
		prev, _ := gr.g.Offset(tp)
		if err := queue.CheckCommit(prev.Metadata, o.Metadata, own); err != nil {
			perPartition[tp] = fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, err)
			continue
		}
		durable = append(durable, meta.CommittedOffset{
			OffsetKey: meta.OffsetKey{TopicID: t.Meta.ID, Partition: tp.Partition},
			Topic:     tp.Topic, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
			Generation: int32(gen), CommitTime: now,
		})
		apply[tp] = group.Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
			Generation: gen, CommitTime: now, TopicID: t.Meta.ID}
	}
	if len(durable) == 0 {
		return nil
	}
	if err := c.commitFenced(ctx, gr, durable); err != nil {
		return c.unsure(ctx, gr, "commit offsets", err)
	}
	gr.g.SetOffsets(apply)
	return nil
}

// commitFenced stores durable at gr's commit revision and moves it; gr.mu
// is held. See retryFenced.
func (c *Coordinator) commitFenced(ctx context.Context, gr *groupRunner, durable []meta.CommittedOffset) error {
	return c.retryFenced(ctx, gr, "offset commit", func(ctx context.Context, token string) (int64, error) {
		return c.offsets.CommitOffsetsFenced(ctx, c.cfg.Tenant, gr.g.ID(), durable, gr.commitRev, token, gr.claimCond())
	})
}

// retryFenced runs write, a transaction fenced by gr's claim and its commit
// key at gr.commitRev that returns the key's new revision, under one
// random token; gr.mu is held. A try that fails with its outcome unknown
// is made again with the same token, each bounded by commitTryTimeout,
// until etcd answers, within etcdTimeout of the first; the error is then
// the last try's (ErrFenced: refused, not stored).
func (c *Coordinator) retryFenced(ctx context.Context, gr *groupRunner, what string, write func(ctx context.Context, token string) (int64, error)) error {
	token := strconv.FormatInt(int64(c.nodeID), 10) + "-" + strconv.FormatInt(gr.claim.Revision, 10) + "-" +
		strconv.FormatUint(rand.Uint64(), 36)
	budget, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	backoff := commitRetryBackoff
	for try := 1; ; try++ {
		tctx, tcancel := context.WithTimeout(budget, commitTryTimeout)
		rev, err := write(tctx, token)
		tcancel()
		if err == nil {
			gr.commitRev = rev
			if try > 1 {
				c.logger.Info().Str("group", gr.g.ID()).Int("tries", try).Msg(what + " resolved after a try of unknown outcome")
			}
			return nil
		}
		if errors.Is(err, meta.ErrFenced) {
			return err
		}
		c.logger.Warn().Err(err).Str("group", gr.g.ID()).Int("try", try).Msg(what + " outcome unknown; trying it again, fenced")
		select {
		case <-budget.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, commitTryTimeout/2)
	}
}

// FetchOffsets returns the committed offsets of tps (all of them if tps is
// nil). Partitions without a committed offset are absent from the map. An
// unknown group has no offsets.
func (c *Coordinator) FetchOffsets(groupID string, tps []group.TopicPartition) (map[group.TopicPartition]group.Offset, error) {
	out := make(map[group.TopicPartition]group.Offset)
	err := c.locked(context.Background(), groupID, false, func(gr *groupRunner) error {
		if tps == nil {
			tps, _ = gr.g.Offsets()
		}
		for _, tp := range tps {
			o, ok := gr.g.Offset(tp)
			if !ok {
				continue
			}
			if t := c.node.LookupTopic(tp.Topic); t == nil || t.Meta.ID != o.TopicID {
				continue // the topic was deleted (and perhaps recreated)
			}
			out[tp] = o
		}
		return nil
	})
	if errors.Is(err, node.ErrGroupNotFound) {
		return out, nil
	}
	return out, err
}

// ResetOffsets sets a group's offsets, as an admin: only while the group
// has no members (group.ErrNotEmpty otherwise), and only to offsets within
// [log start, high watermark] of each partition (wal.ErrOffsetOutOfRange,
// HTTP 410, otherwise). Nothing is written unless every offset is valid.
func (c *Coordinator) ResetOffsets(ctx context.Context, groupID string, offsets map[string]map[int32]int64) error {
	commits := make(map[group.TopicPartition]OffsetCommit)
	for topic, parts := range offsets {
		for partition, off := range parts {
			t := c.node.LookupTopic(topic)
			if t == nil {
				return fmt.Errorf("reset offsets of group %q: %w: %s", groupID, node.ErrUnknownTopic, topic)
			}
			// The partition's leader knows its range; it may be another broker.
			start, hw, err := c.cluster.PartitionRange(ctx, t, partition)
			if err != nil {
				return fmt.Errorf("reset offsets of group %q: %w", groupID, err)
			}
			if off < start || off > hw {
				return fmt.Errorf("reset offsets of group %q: %s-%d to %d outside [%d, %d]: %w",
					groupID, topic, partition, off, start, hw, wal.ErrOffsetOutOfRange)
			}
			commits[group.TopicPartition{Topic: topic, Partition: partition}] = OffsetCommit{Offset: off, LeaderEpoch: -1}
		}
	}
	return c.locked(ctx, groupID, true, func(gr *groupRunner) error {
		if gr.g.State() != group.Empty {
			return fmt.Errorf("reset offsets of group %q with %d members: %w", groupID, gr.g.Len(), group.ErrNotEmpty)
		}
		perPartition := make(map[group.TopicPartition]error)
		if err := c.writeOffsets(ctx, gr, -1, false, commits, perPartition); err != nil {
			return err
		}
		for _, err := range perPartition {
			return err
		}
		return nil
	})
}

// DeleteOffsets deletes some offsets of a group (OffsetDelete): allowed for
// an Empty group, or for topics no member of a consumer group subscribes to.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, tps []group.TopicPartition) (map[group.TopicPartition]error, error) {
	perPartition := make(map[group.TopicPartition]error)
	err := c.locked(ctx, groupID, false, func(gr *groupRunner) error {
		subscribed := map[string]bool{}
		if gr.g.State() != group.Empty {
			if gr.g.ProtocolType() != "consumer" {
				return fmt.Errorf("group %q is %s: %w", groupID, gr.g.State(), group.ErrNotEmpty)
			}
			subscribed = gr.g.Subscribed(consumerTopics)
		}
		var keys []meta.OffsetKey
		var gone []group.TopicPartition
		for _, tp := range tps {
			switch {
			case subscribed[tp.Topic]:
				perPartition[tp] = fmt.Errorf("%w: %s", node.ErrGroupSubscribedToTopic, tp.Topic)
			case c.node.LookupTopic(tp.Topic) == nil:
				perPartition[tp] = fmt.Errorf("%w: %s", node.ErrUnknownTopic, tp.Topic)
			default:
				if o, ok := gr.g.Offset(tp); ok {
					keys = append(keys, meta.OffsetKey{TopicID: o.TopicID, Partition: tp.Partition})
					gone = append(gone, tp)
				}
			}
		}
		wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if err := c.offsets.DeleteOffsetsIf(wctx, c.cfg.Tenant, groupID, keys, gr.claimCond()); err != nil {
			return c.unsure(ctx, gr, "delete offsets", err)
		}
		gr.g.DeleteOffsets(gone)
		return nil
	})
	return perPartition, err
}

// unsure answers a failed offset write of gr; gr.mu is held. A write the
// claim's condition refused is fenced's. Any other failure may have
// changed etcd all the same (the transaction applied and its answer was
// lost, or some of several transactions were stored), so the group's memory
// can no longer be trusted to match etcd: the group is released, and the
// next request claims it again and loads its offsets from etcd. Releasing
// deletes the claim when etcd answers, which also fails any write of ours
// still on its way, since each is conditioned on the claim's revision.
func (c *Coordinator) unsure(ctx context.Context, gr *groupRunner, what string, err error) error {
	if errors.Is(err, meta.ErrFenced) {
		return c.fenced(ctx, gr, err)
	}
	c.release(ctx, gr, what+": outcome unknown")
	return fmt.Errorf("group %q: %s: %w: %w", gr.g.ID(), what, node.ErrCoordinatorUnavailable, err)
}

// consumerTopics decodes the topics of consumer-protocol member metadata.
func consumerTopics(metadata []byte) []string {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil
	}
	return m.Topics
}

// expire deletes offsets past retention and forgets a group left with
// nothing; gr.mu is held.
func (c *Coordinator) expire(ctx context.Context, gr *groupRunner, now time.Time) {
	if tps := gr.g.ExpiredOffsets(now); len(tps) > 0 {
		keys := make([]meta.OffsetKey, 0, len(tps))
		for _, tp := range tps {
			o, _ := gr.g.Offset(tp)
			keys = append(keys, meta.OffsetKey{TopicID: o.TopicID, Partition: tp.Partition})
		}
		wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		err := c.offsets.DeleteOffsetsIf(wctx, c.cfg.Tenant, gr.g.ID(), keys, gr.claimCond())
		cancel()
		if errors.Is(err, meta.ErrFenced) {
			_ = c.fenced(ctx, gr, err)
			return
		}
		if err != nil {
			c.logger.Warn().Err(err).Str("group", gr.g.ID()).Msg("delete expired offsets; will retry")
			return
		}
		gr.g.DeleteOffsets(tps)
		c.logger.Info().Str("group", gr.g.ID()).Int("offsets", len(tps)).Msg("expired committed offsets")
	}
	if gr.g.Deletable() {
		_ = gr.g.MarkDead(now)
		c.release(ctx, gr, "empty group expired")
	}
}

// forgetTopic deletes every group's committed offsets of a deleted topic
// (identified by its ID, so a topic recreated under the same name keeps its
// own). Failures are logged: the offsets are already ignored, since their
// topic ID no longer exists, and the next deletion of the topic retries.
func (c *Coordinator) ForgetTopic(ctx context.Context, name string, id [16]byte) {
	for _, gr := range c.snapshot() {
		gr.mu.Lock()
		if !gr.serving() {
			gr.mu.Unlock()
			continue
		}
		tps, all := gr.g.Offsets()
		var gone []group.TopicPartition
		var keys []meta.OffsetKey
		for _, tp := range tps {
			if o := all[tp]; tp.Topic == name && o.TopicID == id {
				gone = append(gone, tp)
				keys = append(keys, meta.OffsetKey{TopicID: id, Partition: tp.Partition})
			}
		}
		if len(keys) > 0 {
			wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
			err := c.offsets.DeleteOffsetsIf(wctx, c.cfg.Tenant, gr.g.ID(), keys, gr.claimCond())
			cancel()
			if errors.Is(err, meta.ErrFenced) {
				_ = c.fenced(ctx, gr, err)
			} else if err != nil {
				c.logger.Warn().Err(err).Str("group", gr.g.ID()).Str("topic", name).Msg("delete offsets of a deleted topic")
			} else {
				gr.g.DeleteOffsets(gone)
			}
		}
		gr.mu.Unlock()
	}
}
