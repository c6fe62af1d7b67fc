package adminapi

// This file owns the partition reassignment routes (KIP-455's shape, over
// HTTP): a request stores the target replicas, a cancel moves back to the
// original ones, a listing shows each pending reassignment's step. The
// work is the controller's (broker/cluster/reassign.go); any broker takes
// these requests, since they only validate and write etcd.
//
// Invariant: a target is refused with 400 and the rule it breaks (an
// unknown or dead broker, two replicas in one AZ, another replication
// factor, a repeated or negative id) before anything is written.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/meta"
)

// Reassigner is what the reassignment routes need: the broker's cluster
// role implements it.
type Reassigner interface {
	RequestReassignment(ctx context.Context, topic string, partition int32, target []int32) (meta.Reassignment, error)
	CancelReassignment(ctx context.Context, topic string, partition int32) (meta.Reassignment, error)
	ListReassignments(ctx context.Context) ([]meta.ReassignmentStatus, error)
}

// WithReassign serves the reassignment routes over x when it is a
// Reassigner; otherwise they answer 501.
func (a *API) WithReassign(x any) *API {
	a.r, _ = x.(Reassigner)
	return a
}

// reassignResponse is the 202 answer of a request or a cancel.
type reassignResponse struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Target    []int32   `json:"target"`
	Original  []int32   `json:"original"`
	Cancelled bool      `json:"cancelled"`
	Requested time.Time `json:"requested"`
	Message   string    `json:"message"`
}

func (a *API) reassign(w http.ResponseWriter, r *http.Request) {
	if a.r == nil {
		a.b.WriteError(w, r, apierr.Errorf(http.StatusNotImplemented, "not_implemented", "partition reassignment is not available on this broker"))
		return
	}
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || n < 0 {
		a.b.WriteError(w, r, apierr.BadRequest("partition %q is not a partition number", r.PathValue("partition")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	var rec meta.Reassignment
	msg := "reassignment stored: the controller adds the new replicas one at a time, each copying the leader's local tail, then removes the old ones once the new ones caught up; GET /v1/admin/reassignments shows its step"
	if r.Method == http.MethodDelete {
		rec, err = a.r.CancelReassignment(ctx, name, int32(n))
		msg = "reassignment cancelled: the controller moves the partition back to its original replicas"
	} else {
		var req struct {
			Replicas []int32 `json:"replicas"`
		}
		if err := a.b.DecodeJSON(w, r, &req); err != nil {
			a.b.WriteError(w, r, err)
			return
		}
		if req.Replicas == nil {
			a.b.WriteError(w, r, apierr.BadRequest(`the body needs "replicas": the target node ids, the preferred leader first`))
			return
		}
		rec, err = a.r.RequestReassignment(ctx, name, int32(n), req.Replicas)
	}
	if err != nil {
		a.b.WriteError(w, r, reassignError(err))
		return
	}
	a.log.Info().Str("topic", name).Int64("partition", n).Ints32("target", rec.Target).Bool("cancelled", rec.Cancelled).
		Str("remote", r.RemoteAddr).Msg("partition reassignment changed over the admin API")
	writeJSON(w, http.StatusAccepted, reassignResponse{Topic: name, Partition: int32(n), Target: rec.Target, Original: rec.Original,
		Cancelled: rec.Cancelled, Requested: rec.Requested, Message: msg})
}

// reassignError maps a Reassigner error to its HTTP error.
func reassignError(err error) error {
	switch {
	case errors.Is(err, meta.ErrInvalidReassignment):
		return apierr.Errorf(http.StatusBadRequest, "invalid_reassignment", "%v", err)
	case errors.Is(err, meta.ErrTopicNotFound) || errors.Is(err, meta.ErrPartitionNotFound):
		return apierr.Errorf(http.StatusNotFound, "unknown_topic_or_partition", "%v", err)
	case errors.Is(err, meta.ErrNoReassignment):
		return apierr.Errorf(http.StatusNotFound, "no_reassignment", "%v", err)
	}
	return unavailable("metadata_unavailable", "%v; retry", err)
}

func (a *API) listReassignments(w http.ResponseWriter, r *http.Request) {
	if a.r == nil {
		a.b.WriteError(w, r, apierr.Errorf(http.StatusNotImplemented, "not_implemented", "partition reassignment is not available on this broker"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	list, err := a.r.ListReassignments(ctx)
	if err != nil {
		a.b.WriteError(w, r, unavailable("metadata_unavailable", "read the pending reassignments: %v; retry", err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Reassignments []meta.ReassignmentStatus `json:"reassignments"`
	}{list})
}
