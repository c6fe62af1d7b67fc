package redriveapi

// This file owns the redrive routes (doc.go draws them): starting a job
// (its scope frozen at the DLQ's high watermarks), its progress, the jobs
// of a DLQ, and cancelling.
//
// Invariant: a job is shown or cancelled only to a caller of its tenant
// (Frontend.Show) whom the ACLs allow DESCRIBE (progress) or READ (cancel)
// on its DLQ; starting one needs READ on the DLQ and WRITE on the target
// (the route table, httpapi/routes.go).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
)

// Frontend is what the handlers need of the HTTP front end.
type Frontend interface {
	Decode(w http.ResponseWriter, r *http.Request, v any) error
	WriteJSON(w http.ResponseWriter, status int, v any)
	WriteError(w http.ResponseWriter, r *http.Request, err error)
	// Show is the client's name of an internal topic name, false when it
	// is not of the caller's tenant.
	Show(r *http.Request, internal string) (string, bool)
	// Allowed refuses (a 403) an operation ("read", "describe") on an
	// internal topic name that the caller's ACLs do not allow.
	Allowed(r *http.Request, op string, topic string) error
	// Tenant is the tenant of an internal name.
	Tenant(internal string) string
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

func notFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no redrive %q", id)}
}

// StartRequest is the body of POST /v1/dlq/{topic}/redrives.
type StartRequest struct {
	Target     string  `json:"target"`
	FromOffset int64   `json:"from_offset,omitempty"`
	ToOffset   int64   `json:"to_offset,omitempty"`
	FromMs     int64   `json:"from_ms,omitempty"`
	ToMs       int64   `json:"to_ms,omitempty"`
	Key        *string `json:"message_key,omitempty"`
	KeyBase64  *string `json:"key_base64,omitempty"`
	Class      string  `json:"error_class,omitempty"`
	Rate       int     `json:"rate,omitempty"`
}

// PartitionView is one DLQ partition's progress.
type PartitionView struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	Cursor    int64 `json:"cursor"`
	Redriven  int64 `json:"redriven"`
	Deduped   int64 `json:"deduped"`
	Skipped   int64 `json:"skipped"`
}

// View is a job as the API shows it.
type View struct {
	ID         string          `json:"id"`
	DLQ        string          `json:"dlq"`
	Target     string          `json:"target"`
	State      string          `json:"state"`
	Reason     string          `json:"reason,omitempty"`
	Scope      ScopeView       `json:"scope"`
	Rate       int             `json:"rate"`
	CreatedMs  int64           `json:"created_ms"`
	FinishedMs int64           `json:"finished_ms,omitempty"`
	Runner     *int32          `json:"runner,omitempty"`
	Total      int64           `json:"total"`   // DLQ records in the frozen offset range
	Decided    int64           `json:"decided"` // of them, redriven, deduped or skipped so far
	Redriven   int64           `json:"redriven"`
	Deduped    int64           `json:"deduped"`
	Skipped    int64           `json:"skipped"`
	Partitions []PartitionView `json:"partitions"`
}

// ScopeView is a job's filter as shown.
type ScopeView struct {
	FromOffset int64   `json:"from_offset,omitempty"`
	ToOffset   int64   `json:"to_offset,omitempty"`
	FromMs     int64   `json:"from_ms,omitempty"`
	ToMs       int64   `json:"to_ms,omitempty"`
	Key        *string `json:"message_key,omitempty"`
	KeyBase64  *string `json:"key_base64,omitempty"`
	Class      string  `json:"error_class,omitempty"`
}

// API serves the redrive routes.
type API struct {
	m  *Manager
	fe Frontend
}

// NewAPI returns the routes of m over fe.
func NewAPI(m *Manager, fe Frontend) *API { return &API{m: m, fe: fe} }

// HandleStart serves POST /v1/dlq/{topic}/redrives.
func (a *API) HandleStart(w http.ResponseWriter, r *http.Request) {
	dlq := r.PathValue("topic")
	var req StartRequest
	if err := a.fe.Decode(w, r, &req); err != nil {
		a.fe.WriteError(w, r, err)
		return
	}
	job, err := a.start(r, dlq, req)
	if err != nil {
		a.m.log.Info().Err(err).Str("dlq", dlq).Msg("redrive refused")
		a.fe.WriteError(w, r, err)
		return
	}
	a.m.log.Info().Str("redrive", job.ID).Str("dlq", dlq).Str("target", job.Target).Msg("redrive started")
	a.m.poke()
	a.fe.WriteJSON(w, http.StatusAccepted, a.view(r, job, nil, nil))
}

func (a *API) start(r *http.Request, dlq string, req StartRequest) (meta.Redrive, error) {
	ctx := r.Context()
	scope := meta.RedriveScope{FromOffset: req.FromOffset, ToOffset: req.ToOffset, FromMs: req.FromMs, ToMs: req.ToMs, Class: req.Class}
	switch {
	case req.Target == "":
		return meta.Redrive{}, badRequest("target is required: the topic to redrive to (the source topic, or a shadow group's)")
	case req.Target == dlq:
		return meta.Redrive{}, badRequest("target %q is the DLQ itself", a.show(r, dlq))
	case req.Rate < 0 || req.Rate > queue.MaxRedriveRate:
		return meta.Redrive{}, badRequest("rate %d: want 0 (unpaced) to %d records per second per partition", req.Rate, queue.MaxRedriveRate)
	case req.Key != nil && req.KeyBase64 != nil:
		return meta.Redrive{}, badRequest("message_key and key_base64 are exclusive")
	case req.Key != nil:
		scope.HasKey, scope.Key = true, []byte(*req.Key)
	case req.KeyBase64 != nil:
		k, err := base64.StdEncoding.DecodeString(*req.KeyBase64)
		if err != nil {
			return meta.Redrive{}, badRequest("key_base64: %v", err)
		}
		scope.HasKey, scope.Key = true, k
	}
	qs := scopeOf(scope)
	if err := qs.Validate(); err != nil {
		return meta.Redrive{}, badRequest("%v", err)
	}
	n, ok := a.m.be.Partitions(dlq)
	if !ok {
		return meta.Redrive{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, a.show(r, dlq))
	}
	tn, ok := a.m.be.Partitions(req.Target)
	if !ok {
		return meta.Redrive{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, a.show(r, req.Target))
	}
	if err := a.noneRunning(ctx, r, dlq, req.Target); err != nil {
		return meta.Redrive{}, err
	}
	starts, hws := map[int32]int64{}, map[int32]int64{}
	for p := range n {
		b, err := a.m.be.Bounds(ctx, dlq, p)
		if err != nil {
			return meta.Redrive{}, err
		}
		starts[p], hws[p] = qs.Start(b.Start), b.HW
	}
	ends := qs.Ends(hws)
	for p := range starts {
		starts[p] = min(starts[p], ends[p])
	}
	targetStarts := map[int32]int64{}
	for p := range tn {
		b, err := a.m.be.Bounds(ctx, req.Target, p)
		if err != nil {
			return meta.Redrive{}, err
		}
		targetStarts[p] = b.HW
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	job := meta.Redrive{ID: hex.EncodeToString(raw[:]), Tenant: a.fe.Tenant(dlq), DLQ: dlq, Target: req.Target, Scope: scope,
		Rate: req.Rate, Starts: starts, Ends: ends, TargetStarts: targetStarts, State: meta.RedriveRunning,
		CreatedMs: a.m.now().UnixMilli()}
	cctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	return a.m.store.CreateRedrive(cctx, job)
}

// noneRunning refuses (409 redrive_running, naming it) a job while another
// one on the same DLQ and target runs: each would publish what the other
// is publishing, neither seeing the other's progress. (Two starts racing
// past this check both get created; the later one's runner waits for the
// earlier one to end, dedupe.go.)
func (a *API) noneRunning(ctx context.Context, r *http.Request, dlq, target string) error {
	lctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	jobs, err := a.m.store.ListRedrives(lctx)
	if err != nil && len(jobs) == 0 {
		return err
	}
	for _, j := range jobs {
		if j.State == meta.RedriveRunning && j.DLQ == dlq && j.Target == target {
			return &Error{Status: http.StatusConflict, Code: "redrive_running", Message: fmt.Sprintf(
				"redrive %s of %s to %s is running: wait for it to end or cancel it (POST /v1/redrives/%s/cancel); a new job then skips what it redrove",
				j.ID, a.show(r, dlq), a.show(r, target), j.ID)}
		}
	}
	return nil
}

// HandleList serves GET /v1/dlq/{topic}/redrives.
func (a *API) HandleList(w http.ResponseWriter, r *http.Request) {
	dlq := r.PathValue("topic")
	ctx, cancel := context.WithTimeout(r.Context(), etcdTimeout)
	defer cancel()
	jobs, err := a.m.store.ListRedrives(ctx)
	if err != nil && len(jobs) == 0 {
		a.fe.WriteError(w, r, err)
		return
	}
	out := struct {
		Redrives []View `json:"redrives"`
	}{Redrives: []View{}}
	for _, j := range jobs {
		if j.DLQ != dlq {
			continue
		}
		v, err := a.load(ctx, r, j.ID)
		if err != nil {
			continue
		}
		out.Redrives = append(out.Redrives, v)
	}
	sort.Slice(out.Redrives, func(i, k int) bool { return out.Redrives[i].CreatedMs > out.Redrives[k].CreatedMs })
	a.fe.WriteJSON(w, http.StatusOK, out)
}

// HandleGet serves GET /v1/redrives/{id}.
func (a *API) HandleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	job, err := a.visible(r, id, "describe")
	if err != nil {
		a.fe.WriteError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), etcdTimeout)
	defer cancel()
	v, err := a.load(ctx, r, job.ID)
	if err != nil {
		a.fe.WriteError(w, r, err)
		return
	}
	a.fe.WriteJSON(w, http.StatusOK, v)
}

// HandleCancel serves POST /v1/redrives/{id}/cancel. Cancelling a job that
// ended already is no error: the answer shows its state.
func (a *API) HandleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), etcdTimeout)
	defer cancel()
	for range 10 {
		job, err := a.visible(r, id, "read")
		if err != nil {
			a.fe.WriteError(w, r, err)
			return
		}
		if job.State != meta.RedriveRunning {
			break
		}
		job.State, job.FinishedMs, job.Reason = meta.RedriveCancelled, a.m.now().UnixMilli(), "cancelled by the client"
		if _, err = a.m.store.UpdateRedrive(ctx, job, nil); err == nil {
			a.m.log.Info().Str("redrive", id).Msg("redrive cancelled")
			break
		}
		if !errors.Is(err, meta.ErrConflict) {
			a.fe.WriteError(w, r, err)
			return
		}
	}
	v, err := a.load(ctx, r, id)
	if err != nil {
		a.fe.WriteError(w, r, err)
		return
	}
	a.fe.WriteJSON(w, http.StatusOK, v)
}

// visible reads a job the caller may act on with op on its DLQ: a job of
// another tenant is not found.
func (a *API) visible(r *http.Request, id, op string) (meta.Redrive, error) {
	if queue.ValidateRedriveID(id) != nil {
		return meta.Redrive{}, notFound(id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), etcdTimeout)
	defer cancel()
	job, _, err := a.m.store.GetRedrive(ctx, id)
	if errors.Is(err, meta.ErrNotFound) {
		return meta.Redrive{}, notFound(id)
	}
	if err != nil {
		return meta.Redrive{}, err
	}
	if _, ok := a.fe.Show(r, job.DLQ); !ok {
		return meta.Redrive{}, notFound(id)
	}
	if err := a.fe.Allowed(r, op, job.DLQ); err != nil {
		return meta.Redrive{}, err
	}
	return job, nil
}

// load reads a job with its progress and runner, as shown.
func (a *API) load(ctx context.Context, r *http.Request, id string) (View, error) {
	job, prog, err := a.m.store.GetRedrive(ctx, id)
	if err != nil {
		return View{}, err
	}
	var runner *int32
	if n, ok, err := a.m.store.RedriveHolder(ctx, id); err == nil && ok {
		runner = &n
	}
	return a.view(r, job, prog, runner), nil
}

func (a *API) show(r *http.Request, internal string) string {
	n, _ := a.fe.Show(r, internal)
	return n
}

func (a *API) view(r *http.Request, job meta.Redrive, prog map[int32]meta.RedriveProgress, runner *int32) View {
	v := View{ID: job.ID, DLQ: a.show(r, job.DLQ), Target: a.show(r, job.Target), State: string(job.State), Reason: job.Reason,
		Rate: job.Rate, CreatedMs: job.CreatedMs, FinishedMs: job.FinishedMs, Runner: runner, Partitions: []PartitionView{},
		Scope: ScopeView{FromOffset: job.Scope.FromOffset, ToOffset: job.Scope.ToOffset, FromMs: job.Scope.FromMs, ToMs: job.Scope.ToMs, Class: job.Scope.Class}}
	if job.Scope.HasKey {
		k := string(job.Scope.Key)
		if strings.ToValidUTF8(k, "") == k {
			v.Scope.Key = &k
		} else {
			k = base64.StdEncoding.EncodeToString(job.Scope.Key)
			v.Scope.KeyBase64 = &k
		}
	}
	for p, end := range job.Ends {
		pv := PartitionView{Partition: p, Start: job.Starts[p], End: end, Cursor: job.Starts[p]}
		if pr, ok := prog[p]; ok {
			pv.Cursor, pv.Redriven, pv.Deduped, pv.Skipped = pr.Cursor, pr.Redriven, pr.Deduped, pr.Skipped
		}
		v.Total += max(end-pv.Start, 0)
		v.Decided += max(min(pv.Cursor, end)-pv.Start, 0)
		v.Redriven += pv.Redriven
		v.Deduped += pv.Deduped
		v.Skipped += pv.Skipped
		v.Partitions = append(v.Partitions, pv)
	}
	sort.Slice(v.Partitions, func(i, k int) bool { return v.Partitions[i].Partition < v.Partitions[k].Partition })
	return v
}
