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
	// Committed is the group's committed offset of a partition, or the
	// partition's log start when none is committed.
	Committed(ctx context.Context, groupID string, tp TP) (int64, error)
	// Read returns records from offset from on, below the high watermark,
	// about maxBytes of them (at least one batch), without waiting.
	Read(ctx context.Context, tp TP, from int64, maxBytes int) ([]Record, error)
	// Commit commits offsets for the member.
	Commit(ctx context.Context, groupID, memberID string, gen int32, offsets map[TP]int64) error
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

// Error is a refusal with its HTTP status.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}

// API serves the queue routes.
type API struct {
	be    Backend
	log   zerolog.Logger
	now   func() time.Time
	limit int // per-partition tracker limit

	rndMu sync.Mutex
	rnd   *rand.Rand

	mu     sync.Mutex
	groups map[string]*groupState
}

// New returns the API over be.
func New(be Backend, log zerolog.Logger) *API {
	return &API{be: be, log: log, now: time.Now, limit: queue.DefaultTrackerLimit,
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
	tr     *queue.Tracker
	source string // the source topic (itself for a source partition)
	tier   int    // -1 for a source partition
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
			out = append(out, readPart{TP{t, p}, part{source: t, tier: -1}})
			for tier := range c.Backoff {
				name := retryTopic(groupID, t, tier)
				if _, n, ok := a.be.Topic(name); ok && p < n {
					out = append(out, readPart{TP{name, p}, part{source: t, tier: tier}})
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
	committed, err := a.be.Committed(ctx, groupID, tp)
	if err != nil {
		return nil, err
	}
	p.tr = queue.NewTracker(committed, a.limit)
	gs.parts[tp] = &p
	return &p, nil
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

// errUnsupported refuses a nack on a strict topic (part 2).
var errUnsupported = errors.New("unsupported")

// errNotDelivered refuses an ack or nack of a record this generation did
// not deliver to the group (or already settled).
var errNotDelivered = errors.New("not delivered")
