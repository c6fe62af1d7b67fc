package queueapi

// This file owns the API value, its state per group (trackers per
// partition of the current generation) and what the handlers share.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// Record is one record as the queue API reads and writes it.
type Record struct {
	Offset      int64
	TimestampMs int64
	Key         []byte // nil: no key
	Value       []byte
	Headers     []queue.Header // without the message_id header
	MessageID   string
}

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Backend is what the API needs of the HTTP front end (httpapi/queue.go).
// Topic and group names are internal.
type Backend interface {
	// Heartbeat refuses a member that is not of generation gen, and
	// counts as its heartbeat.
	Heartbeat(groupID, memberID string, gen int32) error
	// Assignment is the member's assigned partitions by topic.
	Assignment(groupID, memberID string) (map[string][]int32, error)
	// Committed is the group's committed offset of a partition and its
	// metadata, or the partition's log start and "" when none is
	// committed.
	Committed(ctx context.Context, groupID string, tp TP) (int64, string, error)
	// Read returns records from offset from on, below the high watermark,
	// about maxBytes of them (at least one batch), without waiting.
	Read(ctx context.Context, tp TP, from int64, maxBytes int) ([]Record, error)
	// Commit commits offsets for the member.
	Commit(ctx context.Context, groupID, memberID string, gen int32, offsets map[TP]Commit) error
	// CommitOwn commits offsets as the group's coordinator itself, with
	// no member (keys:resume and keys:skip, asked while members run); the
	// coordinator's claim on the group still fences the write.
	CommitOwn(ctx context.Context, groupID string, offsets map[TP]Commit) error
	// GroupOffsets is every committed offset of a group with its
	// metadata.
	GroupOffsets(groupID string) (map[TP]Commit, error)
	// Groups lists the groups this broker coordinates.
	Groups() []string
	// Produce appends one record to a partition, acknowledged like a
	// publish.
	Produce(ctx context.Context, tp TP, rec Record) error
	// Topic is a topic's explicit configs and partition count.
	Topic(name string) (configs map[string]string, partitions int32, ok bool)
	// CreateTopic creates a topic; one that exists already is no error.
	CreateTopic(ctx context.Context, name string, partitions int32) error
	// Bounds is a partition's log start and high watermark, read at its
	// leader.
	Bounds(ctx context.Context, tp TP) (start, end int64, err error)

	// The front end's plumbing: JSON decoding, answers and errors in
	// its format and tenant scope.
	Decode(w http.ResponseWriter, r *http.Request, v any) error
	WriteJSON(w http.ResponseWriter, status int, v any)
	WriteError(w http.ResponseWriter, r *http.Request, err error)
	// Show is the client's name of an internal topic name.
	Show(r *http.Request, internal string) string
}

// Commit is one partition's committed offset and metadata (a lane's
// state, queue.EncodeState).
type Commit struct {
	Offset   int64
	Metadata string
}

// Error is a refusal with its HTTP status: the HTTP API's one error answer
// (broker/httpapi/apierr), which the Backend's WriteError writes.
type Error = apierr.Error

func badRequest(format string, args ...any) *Error { return apierr.BadRequest(format, args...) }

// API serves the queue routes.
type API struct {
	be     Backend
	log    zerolog.Logger
	now    func() time.Time
	limit  int           // per-partition tracker limit
	copies *copyCounters // metrics_copies.go

	rndMu sync.Mutex
	rnd   *rand.Rand

	mu     sync.Mutex
	groups map[string]*groupState
}

// New returns the API over be.
func New(be Backend, log zerolog.Logger) *API {
	return &API{be: be, log: log, now: time.Now, limit: queue.DefaultTrackerLimit, copies: newCopyCounters(),
		rnd: rand.New(rand.NewSource(time.Now().UnixNano())), groups: map[string]*groupState{}}
}

func (a *API) random() float64 {
	a.rndMu.Lock()
	defer a.rndMu.Unlock()
	return a.rnd.Float64()
}

// groupState is one group's trackers for its current generation; mu
// serialises the group's queue requests.
type groupState struct {
	mu    sync.Mutex
	gen   int32
	parts map[TP]*part
}

// part is one partition the group reads: a source partition or one of its
// retry tiers.
type part struct {
	visibility time.Duration // the source's visibility.timeout.ms
	lane       *queue.Lane
	source     string // the source topic (itself for a source partition)
	tier       int    // -1 for a source partition
}

// group returns the group's state, locked, for generation gen: a newer
// generation starts from the committed offsets again.
func (a *API) group(groupID string, gen int32) (*groupState, error) {
	a.mu.Lock()
	gs := a.groups[groupID]
	if gs == nil {
		gs = &groupState{gen: gen, parts: map[TP]*part{}}
		a.groups[groupID] = gs
	}
	a.mu.Unlock()
	gs.mu.Lock()
	switch {
	case gen > gs.gen:
		gs.gen, gs.parts = gen, map[TP]*part{}
	case gen < gs.gen:
		gs.mu.Unlock()
		return nil, &Error{Status: http.StatusConflict, Code: "ILLEGAL_GENERATION",
			Message: fmt.Sprintf("generation %d of group %s is stale; the queue serves generation %d: join again", gen, groupID, gs.gen)}
	}
	return gs, nil
}

// member checks a request's member and generation and returns the group's
// state, locked, and the member's assignment.
func (a *API) member(groupID, memberID string, gen *int32) (*groupState, map[string][]int32, error) {
	if memberID == "" || gen == nil {
		return nil, nil, badRequest("member_id and generation are required")
	}
	if err := a.be.Heartbeat(groupID, memberID, *gen); err != nil {
		return nil, nil, err
	}
	assigned, err := a.be.Assignment(groupID, memberID)
	if err != nil {
		return nil, nil, err
	}
	gs, err := a.group(groupID, *gen)
	return gs, assigned, err
}

// contract is a topic's contract; a stored config that no longer parses
// (validated when set) falls back to the defaults, logged.
func (a *API) contract(topic string) (queue.Contract, int32, bool) {
	configs, n, ok := a.be.Topic(topic)
	if !ok {
		return queue.Contract{}, 0, false
	}
	c, err := queue.ParseContract(configs)
	if err != nil {
		a.log.Warn().Err(err).Str("topic", topic).Msg("delivery contract does not parse; using the defaults")
		c, _ = queue.ParseContract(nil)
	}
	return c, n, true
}

// retryTopic is the internal name of groupID's tier of the internal source.
func retryTopic(groupID, source string, tier int) string {
	tenant, group := node.SplitName(groupID)
	_, topic := node.SplitName(source)
	budget := 249 - (len(node.QualifyName(tenant, "x")) - 1)
	return node.QualifyName(tenant, queue.RetryTopic(group, topic, tier, budget))
}

// readPart is a partition a member reads, and what it is.
type readPart struct {
	tp TP
	p  part
}

// sourceParts lists what a member reads: each assigned source partition
// and the existing tiers of it, in a stable order.
func (a *API) sourceParts(groupID string, assigned map[string][]int32) []readPart {
	topics := make([]string, 0, len(assigned))
	for t := range assigned {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var out []readPart
	for _, t := range topics {
		c, _, ok := a.contract(t)
		if !ok {
			continue
		}
		parts := append([]int32(nil), assigned[t]...)
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			out = append(out, readPart{TP{t, p}, part{source: t, tier: -1, visibility: c.Visibility}})
			for tier := range c.Backoff {
				name := retryTopic(groupID, t, tier)
				if _, n, ok := a.be.Topic(name); ok && p < n {
					out = append(out, readPart{TP{name, p}, part{source: t, tier: tier, visibility: c.Visibility}})
				}
			}
		}
	}
	return out
}

// partOf returns the group's state of a partition the member was
// assigned, starting its tracker at the committed offset.
func (a *API) partOf(ctx context.Context, gs *groupState, groupID string, tp TP, p part) (*part, error) {
	if cur := gs.parts[tp]; cur != nil {
		return cur, nil
	}
	lane, err := a.loadLane(ctx, groupID, tp, p)
	if err != nil {
		return nil, err
	}
	p.lane = lane
	gs.parts[tp] = &p
	return &p, nil
}

// loadLane restores a partition's lane from the group's commit: its
// offset and the state in its metadata. A tier's lane is relaxed; a
// source's follows its topic's delivery.order.
func (a *API) loadLane(ctx context.Context, groupID string, tp TP, p part) (*queue.Lane, error) {
	committed, md, err := a.be.Committed(ctx, groupID, tp)
	if err != nil {
		return nil, err
	}
	order := queue.OrderRelaxed
	if c, _, ok := a.contract(p.source); ok && p.tier < 0 {
		order = c.Order
	}
	st, err := queue.DecodeState(md, committed)
	if err != nil {
		// Never written by this broker: what it said is lost, so its
		// records are delivered again (a duplicate, not a loss).
		a.log.Warn().Err(err).Str("group", groupID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
			Msg("queue state in the commit metadata does not decode; starting from the committed offset")
		st = queue.LaneState{Committed: committed}
	}
	return queue.FromState(order, st, a.limit), nil
}

// commitOf is a lane's commit: its committed offset and durable state.
func commitOf(l *queue.Lane) (Commit, error) {
	md, err := queue.EncodeState(l.State(queue.MaxDoneRanges))
	return Commit{Offset: l.Committed(), Metadata: md}, err
}

// assignedTo reports whether the member's assignment holds the source
// partition of pt.
func assignedTo(assigned map[string][]int32, source string, partition int32) bool {
	for _, p := range assigned[source] {
		if p == partition {
			return true
		}
	}
	return false
}

// errNotDelivered refuses an ack or nack of a record this generation did
// not deliver to the group (or already settled).
var errNotDelivered = errors.New("not delivered")
