package meta

// This file owns the records of dead-letter redrives (broker/redrive):
//
//	<prefix>redrives/<id>             {"v":1,"id","tenant","dlq","target","scope":{...},
//	                                   "rate","starts":{"<p>":off},"ends":{"<p>":off},
//	                                   "target_starts":{"<p>":off},"state","created_ms",
//	                                   "finished_ms","reason"}
//	<prefix>redrive-progress/<id>/<p> {"v":1,"partition","cursor","marks":{"<tp>":off},
//	                                   "redriven","deduped","skipped","updated_ms"}
//	<prefix>redrive-claims/<id>       node id, decimal, bound to the runner's
//	                                  registration lease
//
// <id> is the job's id (queue.ValidateRedriveID: [a-z0-9-]); dlq and target
// are internal topic names. "ends" is the scope frozen at the start (each
// DLQ partition's high watermark then); "cursor" is the next DLQ offset of
// the partition still to be decided; "marks" are, per target partition, an
// offset at or below every copy this partition's runner published there
// after its cursor was written (where a resumed runner looks for them).
//
// Invariant: a job record is created only if absent; its state moves only
// running → cancelled | done | failed, each by a transaction conditioned on
// the revision it was read at.
// Invariant: progress is written only under the job's claim (a transaction
// conditioned on the claim key's create revision): a runner that lost its
// claim (its lease expired, another broker took the job) cannot move a
// cursor.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RedriveState is a redrive job's state.
type RedriveState string

// The states of a redrive job.
const (
	RedriveRunning   RedriveState = "running"
	RedriveCancelled RedriveState = "cancelled"
	RedriveDone      RedriveState = "done"
	RedriveFailed    RedriveState = "failed"
)

// RedriveScope is a job's filter (queue.RedriveScope, stored).
type RedriveScope struct {
	FromOffset int64  `json:"from_offset,omitempty"`
	ToOffset   int64  `json:"to_offset,omitempty"`
	FromMs     int64  `json:"from_ms,omitempty"`
	ToMs       int64  `json:"to_ms,omitempty"`
	HasKey     bool   `json:"has_key,omitempty"`
	Key        []byte `json:"key,omitempty"`
	Class      string `json:"class,omitempty"`
}

// Redrive is one job's record.
type Redrive struct {
	V            int             `json:"v"`
	ID           string          `json:"id"`
	Tenant       string          `json:"tenant"`
	DLQ          string          `json:"dlq"`
	Target       string          `json:"target"`
	Scope        RedriveScope    `json:"scope"`
	Rate         int             `json:"rate,omitempty"` // records per second per partition; 0: unpaced
	Starts       map[int32]int64 `json:"starts"`
	Ends         map[int32]int64 `json:"ends"`
	TargetStarts map[int32]int64 `json:"target_starts"`
	State        RedriveState    `json:"state"`
	CreatedMs    int64           `json:"created_ms"`
	FinishedMs   int64           `json:"finished_ms,omitempty"`
	Reason       string          `json:"reason,omitempty"`

	Revision int64 `json:"-"` // mod revision when read
}

// RedriveProgress is one DLQ partition's progress in a job.
type RedriveProgress struct {
	V         int             `json:"v"`
	Partition int32           `json:"partition"`
	Cursor    int64           `json:"cursor"`
	Marks     map[int32]int64 `json:"marks"`
	Redriven  int64           `json:"redriven"`
	Deduped   int64           `json:"deduped"`
	Skipped   int64           `json:"skipped"`
	UpdatedMs int64           `json:"updated_ms"`
}

// RedriveClaim is one broker's tenure as the runner of one job.
type RedriveClaim struct {
	ID       string
	NodeID   int32
	Lease    clientv3.LeaseID
	Revision int64 // create revision of the claim key
	key      string
}

// If holds only while this claim's key exists at its create revision.
func (c RedriveClaim) If() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.Revision)
}

// ValidateRedrive checks the shape of a job record.
func ValidateRedrive(r Redrive) error {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("meta: redrive %q: %s: %w", r.ID, fmt.Sprintf(why, args...), ErrCorrupt)
	}
	switch {
	case r.V != 1:
		return fmt.Errorf("meta: redrive %q: version %d: %w", r.ID, r.V, ErrUnknownVersion)
	case r.ID == "" || len(r.ID) > 64 || strings.ContainsAny(r.ID, "/ "):
		return bad("bad id")
	case r.DLQ == "" || r.Target == "":
		return bad("no dlq or target")
	case r.Rate < 0:
		return bad("rate %d", r.Rate)
	}
	switch r.State {
	case RedriveRunning, RedriveCancelled, RedriveDone, RedriveFailed:
	default:
		return bad("unknown state %q", r.State)
	}
	return nil
}

func (s *Store) redriveKey(id string) string { return s.prefix + "redrives/" + id }
func (s *Store) redriveProgressPrefix(id string) string {
	return s.prefix + "redrive-progress/" + id + "/"
}
func (s *Store) redriveClaimKey(id string) string { return s.prefix + "redrive-claims/" + id }

// CreateRedrive stores a new job; ErrExists if its id is taken.
func (s *Store) CreateRedrive(ctx context.Context, r Redrive) (Redrive, error) {
	r.V = 1
	if err := ValidateRedrive(r); err != nil {
		return Redrive{}, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Redrive{}, fmt.Errorf("meta: encode redrive %q: %w", r.ID, err)
	}
	key := s.redriveKey(r.ID)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return Redrive{}, fmt.Errorf("meta: create redrive %q: %w", r.ID, err)
	}
	if !resp.Succeeded {
		return Redrive{}, fmt.Errorf("meta: create redrive %q: %w", r.ID, ErrExists)
	}
	r.Revision = resp.Header.Revision
	return r, nil
}

func decodeRedrive(key string, val []byte, rev int64) (Redrive, error) {
	var r Redrive
	if err := json.Unmarshal(val, &r); err != nil {
		return Redrive{}, fmt.Errorf("meta: redrive %s: %w: %w", key, err, ErrCorrupt)
	}
	if err := ValidateRedrive(r); err != nil {
		return Redrive{}, err
	}
	r.Revision = rev
	return r, nil
}

// GetRedrive reads a job and its progress by partition; ErrNotFound if
// there is no such job.
func (s *Store) GetRedrive(ctx context.Context, id string) (Redrive, map[int32]RedriveProgress, error) {
	key := s.redriveKey(id)
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(s.redriveProgressPrefix(id), clientv3.WithPrefix())).Commit()
	if err != nil {
		return Redrive{}, nil, fmt.Errorf("meta: read redrive %q: %w", id, err)
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return Redrive{}, nil, fmt.Errorf("meta: redrive %q: %w", id, ErrNotFound)
	}
	r, err := decodeRedrive(key, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return Redrive{}, nil, err
	}
	prog := map[int32]RedriveProgress{}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		var p RedriveProgress
		if err := json.Unmarshal(kv.Value, &p); err != nil || p.V != 1 {
			return Redrive{}, nil, fmt.Errorf("meta: redrive progress %s: %w", kv.Key, ErrCorrupt)
		}
		prog[p.Partition] = p
	}
	return r, prog, nil
}

// ListRedrives lists every job, by id.
func (s *Store) ListRedrives(ctx context.Context) ([]Redrive, error) {
	prefix := s.prefix + "redrives/"
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("meta: list redrives: %w", err)
	}
	var out []Redrive
	var bad error
	for _, kv := range resp.Kvs {
		r, err := decodeRedrive(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			bad = err
			continue
		}
		out = append(out, r)
	}
	return out, bad
}

// UpdateRedrive writes r if its record is still at r.Revision (ErrConflict
// otherwise), and only while claim holds when claim is not nil.
func (s *Store) UpdateRedrive(ctx context.Context, r Redrive, claim *RedriveClaim) (Redrive, error) {
	r.V = 1
	if err := ValidateRedrive(r); err != nil {
		return Redrive{}, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Redrive{}, fmt.Errorf("meta: encode redrive %q: %w", r.ID, err)
	}
	key := s.redriveKey(r.ID)
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", r.Revision)}
	if claim != nil {
		conds = append(conds, claim.If())
	}
	resp, err := s.client.Txn(ctx).If(conds...).Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return Redrive{}, fmt.Errorf("meta: update redrive %q: %w", r.ID, err)
	}
	if !resp.Succeeded {
		return Redrive{}, fmt.Errorf("meta: update redrive %q at revision %d: %w", r.ID, r.Revision, ErrConflict)
	}
	r.Revision = resp.Header.Revision
	return r, nil
}

// PutRedriveProgress writes a partition's progress while claim holds;
// ErrConflict when it does not.
func (s *Store) PutRedriveProgress(ctx context.Context, claim RedriveClaim, p RedriveProgress) error {
	p.V = 1
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("meta: encode redrive progress: %w", err)
	}
	key := s.redriveProgressPrefix(claim.ID) + strconv.Itoa(int(p.Partition))
	resp, err := s.client.Txn(ctx).If(claim.If()).Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return fmt.Errorf("meta: write progress of redrive %q: %w", claim.ID, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("meta: write progress of redrive %q: claim lost: %w", claim.ID, ErrConflict)
	}
	return nil
}

// ClaimRedrive takes the claim on a job for node nodeID, bound to lease (the
// broker's registration lease). A claim held by the same lease is returned
// as it is; one held by another fails with ErrConflict.
func (s *Store) ClaimRedrive(ctx context.Context, id string, nodeID int32, lease clientv3.LeaseID) (RedriveClaim, error) {
	if lease == 0 || id == "" {
		return RedriveClaim{}, fmt.Errorf("meta: claim redrive %q with lease %x: %w", id, int64(lease), ErrInvalidConfig)
	}
	key := s.redriveClaimKey(id)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.FormatInt(int64(nodeID), 10), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return RedriveClaim{}, fmt.Errorf("meta: claim redrive %q: %w", id, err)
	}
	c := RedriveClaim{ID: id, NodeID: nodeID, Lease: lease, Revision: resp.Header.Revision, key: key}
	if resp.Succeeded {
		return c, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == lease {
		c.Revision = kvs[0].CreateRevision
		return c, nil
	}
	holder := "?"
	if len(kvs) == 1 {
		holder = string(kvs[0].Value)
	}
	return RedriveClaim{}, fmt.Errorf("meta: claim redrive %q: node %s runs it: %w", id, holder, ErrConflict)
}

// RedriveHolder is the node id running a job, and false when none is.
func (s *Store) RedriveHolder(ctx context.Context, id string) (int32, bool, error) {
	resp, err := s.client.Get(ctx, s.redriveClaimKey(id))
	if err != nil {
		return 0, false, fmt.Errorf("meta: read claim of redrive %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("meta: claim of redrive %q: %q: %w", id, resp.Kvs[0].Value, ErrCorrupt)
	}
	return int32(n), true, nil
}

// ReleaseRedrive deletes the claim if it is still this tenure's.
func (s *Store) ReleaseRedrive(ctx context.Context, c RedriveClaim) error {
	if c.key == "" {
		return nil
	}
	if _, err := s.client.Txn(ctx).If(c.If()).Then(clientv3.OpDelete(c.key)).Commit(); err != nil {
		return fmt.Errorf("meta: release redrive %q: %w", c.ID, err)
	}
	return nil
}
