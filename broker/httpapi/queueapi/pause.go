package queueapi

// This file owns the pauses of the strict orders as an operator sees them:
//
//	POST /v1/groups/{g}/keys:resume  {topic, partition, message_key | key_base64 | null_key}
//	POST /v1/groups/{g}/keys:skip    the same body
//
// (no key on a per-partition-strict topic: the partition's pause), the
// paused keys of a group (Paused: the lag output shows them), and the
// metrics sluice_queue_paused_keys{group,topic} and
// sluice_queue_paused_oldest_age_seconds{group,topic}.
//
// Invariant: a resume or skip is written to the group's commit (its
// metadata: queue.EncodeState) before it is answered, so a rebalance or a
// coordinator failover after the answer keeps it; before the answer a
// failure leaves the pause as it was.
// Invariant: keys:skip writes the dead letter (acknowledged by the
// replicas) before it settles the record; a failed copy leaves the pause.
// Invariant: the paused keys reported are those of the durable commits,
// so every broker reports the same.

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// KeyRequest is the body of keys:resume and keys:skip.
type KeyRequest struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	MessageKey *string `json:"message_key,omitempty"`
	KeyBase64  *string `json:"key_base64,omitempty"`
	NullKey    bool    `json:"null_key,omitempty"`
}

// KeyAnswer is the answer of keys:resume and keys:skip.
type KeyAnswer struct {
	PausedKey
	Status    string `json:"status"`             // resumed | skipped
	ToTopic   string `json:"to_topic,omitempty"` // skipped: the dead-letter topic
	Committed int64  `json:"committed"`          // the partition's committed offset after it
}

// PausedKey is one paused key (or partition) of a group.
type PausedKey struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	MessageKey     *string `json:"message_key,omitempty"` // a UTF-8 key
	KeyBase64      *string `json:"key_base64,omitempty"`  // another key
	KeySHA256      string  `json:"key_sha256,omitempty"`  // a key over 64 bytes: its SHA-256 (hex)
	NullKey        bool    `json:"null_key,omitempty"`
	WholePartition bool    `json:"whole_partition,omitempty"` // per-partition-strict
	FirstHeld      int64   `json:"first_held_offset"`
	SinceMs        int64   `json:"paused_since_ms"`
	AgeMs          int64   `json:"age_ms"`
	ErrorClass     string  `json:"error_class,omitempty"`
}

func showPause(topic string, partition int32, p queue.Pause, now time.Time) PausedKey {
	k := PausedKey{Topic: topic, Partition: partition, FirstHeld: p.First, SinceMs: p.Since.UnixMilli(),
		AgeMs: max(0, now.Sub(p.Since).Milliseconds()), ErrorClass: p.Class}
	key, sum, whole, null := queue.ScopeKey(p.Scope)
	switch {
	case whole:
		k.WholePartition = true
	case null:
		k.NullKey = true
	case sum != nil:
		k.KeySHA256 = hex.EncodeToString(sum)
	case utf8.Valid(key):
		s := string(key)
		k.MessageKey = &s
	default:
		s := base64.StdEncoding.EncodeToString(key)
		k.KeyBase64 = &s
	}
	return k
}

// HandleResume serves POST /v1/groups/{group}/keys:resume.
func (a *API) HandleResume(w http.ResponseWriter, r *http.Request) { a.handleKey(w, r, false) }

// HandleSkip serves POST /v1/groups/{group}/keys:skip.
func (a *API) HandleSkip(w http.ResponseWriter, r *http.Request) { a.handleKey(w, r, true) }

func (a *API) handleKey(w http.ResponseWriter, r *http.Request, skip bool) {
	var req KeyRequest
	if err := a.be.Decode(w, r, &req); err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	ans, err := a.resume(r, r.PathValue("group"), req, skip)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	a.be.WriteJSON(w, http.StatusOK, ans)
}

func (a *API) resume(r *http.Request, groupID string, req KeyRequest, skip bool) (KeyAnswer, error) {
	if groupID == "" {
		return KeyAnswer{}, badRequest("group id must not be empty")
	}
	c, n, ok := a.contract(req.Topic)
	switch {
	case !ok:
		return KeyAnswer{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, req.Topic)
	case req.Partition < 0 || req.Partition >= n:
		return KeyAnswer{}, badRequest("partition %d of %s does not exist (it has %d)", req.Partition, a.be.Show(r, req.Topic), n)
	case !c.IsStrict():
		return KeyAnswer{}, badRequest("%s has delivery.order=relaxed: nothing is paused (a nack moves a record aside)", a.be.Show(r, req.Topic))
	}
	scope, err := scopeOfRequest(c.Order, req)
	if err != nil {
		return KeyAnswer{}, err
	}
	ctx := r.Context()
	tp := TP{req.Topic, req.Partition}
	gs := a.anyGroup(groupID)
	defer gs.mu.Unlock()
	var lane *queue.Lane
	loaded := false
	if pt := gs.parts[tp]; pt != nil {
		// The lane in memory is used only while it is what the commit
		// holds: another broker may have coordinated the group since
		// (a failover and back), and its pauses must not be overwritten.
		mine, err1 := commitOf(pt.lane)
		off, md, err2 := a.be.Committed(ctx, groupID, tp)
		if err1 == nil && err2 == nil && mine.Offset == off && mine.Metadata == md {
			lane = pt.lane
		} else {
			delete(gs.parts, tp) // the next fetch loads the durable state
		}
	}
	if lane == nil {
		if lane, err = a.loadLane(ctx, groupID, tp, part{source: req.Topic, tier: -1}); err != nil {
			return KeyAnswer{}, err
		}
		loaded = true
	}
	p, paused := lane.Paused(scope)
	if !paused {
		return KeyAnswer{}, &Error{Status: http.StatusNotFound, Code: "not_paused",
			Message: fmt.Sprintf("group %s has no pause of that key on %s-%d", groupID, a.be.Show(r, req.Topic), req.Partition)}
	}
	ans := KeyAnswer{PausedKey: showPause(a.be.Show(r, req.Topic), req.Partition, p, a.now()), Status: "resumed"}
	if skip {
		dest, err := a.deadLetterPaused(ctx, groupID, tp, c, p)
		if err != nil {
			return KeyAnswer{}, err
		}
		ans.Status, ans.ToTopic = "skipped", a.be.Show(r, dest)
	}
	if skip {
		_, _, err = lane.Skip(scope)
	} else {
		_, err = lane.Resume(scope)
	}
	if err != nil {
		return KeyAnswer{}, err
	}
	lane.OperatorChange() // a consumer's commit from the state before is refused (queue.CheckCommit)
	commit, err := commitOf(lane)
	if err == nil {
		err = a.be.CommitOwn(ctx, groupID, map[TP]Commit{tp: commit})
	}
	if err != nil {
		if !loaded {
			// The lane changed in memory and not in etcd: forget it, so
			// the next fetch loads the durable state (still paused); its
			// deliveries in flight are made again.
			delete(gs.parts, tp)
		}
		return KeyAnswer{}, err
	}
	ans.Committed = commit.Offset
	a.log.Info().Str("group", groupID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Int64("first_held_offset", p.First).Str("status", ans.Status).Msg("pause lifted")
	return ans, nil
}

// anyGroup returns a group's state, locked, whatever its generation.
func (a *API) anyGroup(groupID string) *groupState {
	a.mu.Lock()
	gs := a.groups[groupID]
	if gs == nil {
		gs = &groupState{gen: -1, parts: map[TP]*part{}}
		a.groups[groupID] = gs
	}
	a.mu.Unlock()
	gs.mu.Lock()
	return gs
}

// scopeOfRequest is the scope a keys: request names.
func scopeOfRequest(order string, req KeyRequest) (string, error) {
	given := 0
	for _, b := range []bool{req.MessageKey != nil, req.KeyBase64 != nil, req.NullKey} {
		if b {
			given++
		}
	}
	if order == queue.OrderPerPartitionStrict {
		if given != 0 {
			return "", badRequest("the topic is per-partition-strict: its pause is the partition's; give no key")
		}
		return queue.ScopeOf(order, nil), nil
	}
	if given != 1 {
		return "", badRequest("give one of message_key, key_base64 or null_key")
	}
	switch {
	case req.MessageKey != nil:
		return queue.ScopeOf(order, []byte(*req.MessageKey)), nil
	case req.KeyBase64 != nil:
		key, err := base64.StdEncoding.DecodeString(*req.KeyBase64)
		if err != nil {
			return "", badRequest("key_base64: %v", err)
		}
		return queue.ScopeOf(order, key), nil
	}
	return queue.ScopeOf(order, nil), nil
}

// deadLetterPaused writes a paused record's dead letter (reason skipped)
// and returns the dead-letter topic.
func (a *API) deadLetterPaused(ctx context.Context, groupID string, tp TP, c queue.Contract, p queue.Pause) (string, error) {
	rec, err := a.readOne(ctx, tp, p.First)
	if err != nil {
		return "", err
	}
	now := a.now()
	tenant, group := node.SplitName(groupID)
	_, srcLocal := node.SplitName(tp.Topic)
	class := p.Class
	if class == "" {
		class = queue.ClassTransient
	}
	m := queue.Meta{SourceTopic: srcLocal, SourcePartition: tp.Partition, SourceOffset: p.First, Group: group,
		FirstSeen: p.Since, Attempt: 1, Tier: -1, Due: now, DeadReason: queue.DeadReasonSkipped,
		History: []queue.Failure{{At: p.Since, Class: class, Error: "paused; skipped by keys:skip"}}}
	dest := node.QualifyName(tenant, c.DeadLetterTopic(srcLocal))
	if dest == tp.Topic {
		return "", node.InvalidConfig("dead.letter.topic of %s is the topic itself", srcLocal)
	}
	_, srcParts, _ := a.be.Topic(tp.Topic)
	if err := a.be.CreateTopic(ctx, dest, srcParts); err != nil {
		return "", fmt.Errorf("create %s: %w", dest, err)
	}
	_, destParts, ok := a.be.Topic(dest)
	if !ok || destParts < 1 {
		return "", fmt.Errorf("%w: %s", node.ErrUnknownTopic, dest)
	}
	cp := Record{TimestampMs: now.UnixMilli(), Key: rec.Key, Value: rec.Value, MessageID: rec.MessageID,
		Headers: append(queue.WithoutRetryHeaders(rec.Headers), m.Headers()...)}
	if err := a.be.Produce(ctx, TP{dest, tp.Partition % destParts}, cp); err != nil {
		return dest, err
	}
	a.copies.deadLetters.WithLabelValues(tp.Topic).Inc()
	return dest, nil
}

// Paused lists a group's paused keys by partition, from its durable
// commits.
func (a *API) Paused(r *http.Request, groupID string) map[TP][]PausedKey {
	offs, err := a.be.GroupOffsets(groupID)
	if err != nil {
		return nil
	}
	now := a.now()
	out := map[TP][]PausedKey{}
	for tp, c := range offs {
		st, err := queue.DecodeState(c.Metadata, c.Offset)
		if err != nil {
			continue
		}
		for _, p := range st.Pauses {
			show := tp.Topic
			if r != nil {
				show = a.be.Show(r, tp.Topic)
			}
			out[tp] = append(out[tp], showPause(show, tp.Partition, p, now))
		}
	}
	return out
}

// Metric names of the pauses.
const (
	MetricPausedKeys      = "sluice_queue_paused_keys"
	MetricPausedOldestAge = "sluice_queue_paused_oldest_age_seconds"
)

type pausedCollector struct {
	a         *API
	keys, age *prometheus.Desc
}

// NewPausedCollector reports the paused keys of the groups this broker
// coordinates, per group and topic (internal names), at each scrape.
func NewPausedCollector(a *API) prometheus.Collector {
	labels := []string{"group", "topic"}
	return &pausedCollector{a: a,
		keys: prometheus.NewDesc(MetricPausedKeys, "Keys (or partitions, on per-partition-strict topics) a group has paused on a nack, by topic.", labels, nil),
		age:  prometheus.NewDesc(MetricPausedOldestAge, "Age of a group's oldest pause on a topic; 0 when none.", labels, nil)}
}

func (c *pausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.keys; ch <- c.age }

func (c *pausedCollector) Collect(ch chan<- prometheus.Metric) {
	groups := c.a.be.Groups()
	sort.Strings(groups)
	for _, g := range groups {
		type agg struct {
			n   int
			age int64
		}
		by := map[string]*agg{}
		for tp, keys := range c.a.Paused(nil, g) {
			x := by[tp.Topic]
			if x == nil {
				x = &agg{}
				by[tp.Topic] = x
			}
			for _, k := range keys {
				x.n++
				x.age = max(x.age, k.AgeMs)
			}
		}
		for topic, x := range by {
			ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(x.n), g, topic)
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, float64(x.age)/1000, g, topic)
		}
	}
}
