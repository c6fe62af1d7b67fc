package workload

// queue.go owns QueueMember: one member of a consumer group driven through
// the brokers' HTTP queue API (issue 22; broker/httpapi/queueapi/doc.go
// draws the routes): join, messages:fetch, messages:ack, messages:nack,
// keys:resume, keys:skip, and the group's paused keys from its lag. It
// speaks HTTP/JSON to any broker (the broker forwards a group's requests to
// its coordinator) and moves to the next broker when one does not answer.
//
// Invariant: a member is used by one goroutine at a time; the operator's
// calls (Paused, Resume, Skip) need no membership and may come from
// another QueueMember value of the same group.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// QueueMember is one HTTP queue member of Group, subscribed to Topics.
type QueueMember struct {
	Bases  []string // "http://host:port" of each broker
	Group  string
	Topics []string
	HTTP   *http.Client // nil: one with a 15 s timeout

	base   int
	member string
	gen    int32
	joined bool
}

// QueueMessage is one delivered record (queueapi.Message as JSON).
type QueueMessage struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	MessageKey  *string           `json:"message_key"`
	MessageID   string            `json:"message_id"`
	Headers     map[string]string `json:"headers"`
	Payload     *string           `json:"payload"`
	Attempt     int               `json:"attempt"`
	SourceTopic string            `json:"source_topic"`
}

// QueueRef names a delivered record in an ack or a nack.
type QueueRef struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	ErrorClass string `json:"error_class,omitempty"` // nack only
	Error      string `json:"error,omitempty"`       // nack only
}

// QueueResult is the outcome of one ack or nack: ok, retry, dead_letter,
// paused, not_delivered or error.
type QueueResult struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Status    string  `json:"status"`
	Error     string  `json:"error"`
	ToTopic   string  `json:"to_topic"`
	Attempt   int     `json:"attempt"`
	Withdrawn []int64 `json:"withdrawn"`
}

// PausedKey is one paused key of the group as its lag shows it.
type PausedKey struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	MessageKey *string `json:"message_key"`
	FirstHeld  int64   `json:"first_held_offset"`
	AgeMs      int64   `json:"age_ms"`
}

// ErrRejoin says the member's generation is over (or the group moved): the
// next Fetch joins again.
var ErrRejoin = errors.New("workload: the queue member must join again")

// httpStatusError is a non-2xx answer.
type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func (q *QueueMember) client() *http.Client {
	if q.HTTP == nil {
		q.HTTP = &http.Client{Timeout: 15 * time.Second}
	}
	return q.HTTP
}

// call sends one request to the current broker; a transport error moves to
// the next broker for the next call.
func (q *QueueMember) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, q.Bases[q.base%len(q.Bases)]+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := q.client().Do(req)
	if err != nil {
		q.base++
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		q.base++
		return err
	}
	if resp.StatusCode/100 != 2 {
		if resp.StatusCode >= 500 {
			q.base++ // a broker that cannot serve now: try another
		}
		return &httpStatusError{status: resp.StatusCode, body: string(raw)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// Generation is the member's generation (0 before it joined); a Fetch
// that joins again changes it.
func (q *QueueMember) Generation() int32 { return q.gen }

// Join joins the group (again with the same member id when it has one; a
// refused id is dropped for the next attempt).
func (q *QueueMember) Join(ctx context.Context) error {
	var m struct {
		MemberID   string `json:"member_id"`
		Generation int32  `json:"generation"`
	}
	err := q.call(ctx, http.MethodPost, "/v1/groups/"+q.Group+"/members:join", map[string]any{
		"topics": q.Topics, "member_id": q.member, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000}, &m)
	if err != nil {
		var se *httpStatusError
		if errors.As(err, &se) && se.status < 500 {
			q.member = ""
		}
		return err
	}
	q.member, q.gen, q.joined = m.MemberID, m.Generation, true
	return nil
}

func (q *QueueMember) ref() map[string]any {
	return map[string]any{"member_id": q.member, "generation": q.gen}
}

// settle turns an answer refused for the membership into ErrRejoin.
func (q *QueueMember) settle(err error) error {
	var se *httpStatusError
	if errors.As(err, &se) && se.status >= 400 && se.status < 500 && se.status != http.StatusBadRequest {
		q.joined = false
		return fmt.Errorf("%w: %w", ErrRejoin, err)
	}
	return err
}

// Fetch joins when needed and fetches, waiting up to wait.
func (q *QueueMember) Fetch(ctx context.Context, wait time.Duration) ([]QueueMessage, error) {
	if !q.joined {
		if err := q.Join(ctx); err != nil {
			return nil, err
		}
	}
	in := q.ref()
	in["wait_ms"] = wait.Milliseconds()
	var out struct {
		Messages []QueueMessage `json:"messages"`
	}
	if err := q.call(ctx, http.MethodPost, "/v1/groups/"+q.Group+"/messages:fetch", in, &out); err != nil {
		var se *httpStatusError
		if !errors.As(err, &se) || se.status >= 500 {
			// The answer may be lost after the coordinator handed the
			// records out: they stay in flight for this generation
			// (until a visibility timeout, when the topic has one).
			// Leave and join as a new member: a new generation
			// delivers again everything not acknowledged, in order.
			q.leave(ctx)
			return nil, err
		}
		return nil, q.settle(err)
	}
	return out.Messages, nil
}

// Joined reports whether the member has a generation to act in.
func (q *QueueMember) Joined() bool { return q.joined }

// leave leaves the group, best effort, and forgets the membership.
func (q *QueueMember) leave(ctx context.Context) {
	if q.member != "" {
		_ = q.call(ctx, http.MethodPost, "/v1/groups/"+q.Group+"/members:leave", q.ref(), nil)
	}
	q.member, q.joined = "", false
}

// Ack acknowledges refs; Nack reports them failed (with ErrorClass and
// Error). Each returns one result per ref.
func (q *QueueMember) Ack(ctx context.Context, refs ...QueueRef) ([]QueueResult, error) {
	return q.settleAll(ctx, "messages:ack", "acks", refs)
}

// Nack: see Ack.
func (q *QueueMember) Nack(ctx context.Context, refs ...QueueRef) ([]QueueResult, error) {
	return q.settleAll(ctx, "messages:nack", "nacks", refs)
}

func (q *QueueMember) settleAll(ctx context.Context, route, field string, refs []QueueRef) ([]QueueResult, error) {
	in := q.ref()
	in[field] = refs
	var out struct {
		Results []QueueResult `json:"results"`
	}
	if err := q.call(ctx, http.MethodPost, "/v1/groups/"+q.Group+"/"+route, in, &out); err != nil {
		return nil, q.settle(err)
	}
	if len(out.Results) != len(refs) {
		return nil, fmt.Errorf("workload: %s answered %d results for %d records", route, len(out.Results), len(refs))
	}
	return out.Results, nil
}

// Paused lists the group's paused keys (GET /v1/groups/{g}/lag).
func (q *QueueMember) Paused(ctx context.Context) ([]PausedKey, error) {
	var out struct {
		Partitions []struct {
			Paused []PausedKey `json:"paused"`
		} `json:"partitions"`
	}
	if err := q.call(ctx, http.MethodGet, "/v1/groups/"+q.Group+"/lag", nil, &out); err != nil {
		return nil, err
	}
	var ps []PausedKey
	for _, p := range out.Partitions {
		ps = append(ps, p.Paused...)
	}
	return ps, nil
}

// Resume resumes a paused UTF-8 key (keys:resume); Skip dead-letters its
// first held record and resumes the rest (keys:skip).
func (q *QueueMember) Resume(ctx context.Context, topic string, partition int32, key string) error {
	return q.keyOp(ctx, "keys:resume", topic, partition, key)
}

// Skip: see Resume.
func (q *QueueMember) Skip(ctx context.Context, topic string, partition int32, key string) error {
	return q.keyOp(ctx, "keys:skip", topic, partition, key)
}

func (q *QueueMember) keyOp(ctx context.Context, route, topic string, partition int32, key string) error {
	return q.call(ctx, http.MethodPost, "/v1/groups/"+q.Group+"/"+route,
		map[string]any{"topic": topic, "partition": partition, "message_key": key}, nil)
}
