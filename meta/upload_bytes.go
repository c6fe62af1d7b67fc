package meta

// This file owns the per-tenant counters of large-object bytes (issue 20):
// what a tenant's upload sessions (uploads.go) count towards its storage
// quotas, kept beside the records so that a quota check reads one key
// instead of every session record ever published:
//
//	<prefix>upload-bytes/<tenant>   {"v":1,"tenant","open","stored","repairs"}
//	<prefix>upload-bytes-counted    decimal revision (raw string): the counters
//	                                are complete; written once
//
// <tenant> is path-escaped. "open" is the sum of the declared sizes of the
// tenant's open sessions, "stored" that of its completed and published
// ones, condemned included (UploadCharge); aborted and expired sessions,
// and purged records, count nothing. An absent counter is zero. "repairs"
// counts the corrections recounts made (ReconcileUploadBytes).
//
// Invariant: every write of an upload record (CreateUpload, UpdateUpload,
// DeleteUpload, ClaimRef, CondemnUpload) that changes what the record
// counts changes its tenant's counter by the difference in the same
// transaction, which is conditioned on the record's revision (as it was
// before) and on the counter's mod revision as read; a transaction lost
// only to another write of the counter is retried with the counter read
// again after a random pause (countedTxn), any other loss is the caller's
// as before. So, among
// brokers of this version, each counter moves exactly as its tenant's
// records do, at the same revisions.
// Invariant: a counter is never deleted, and its "repairs" only grows.
// Invariant: the counted key is created once and never changes; it exists
// only once the counters equal the records' sums (a fresh layout writes it
// with the layout, when no record exists; otherwise the first complete
// recount does).
//
// Records written before the counters existed moved none. A recount reads
// every record at one revision R and each counter at R, and adds to each
// counter the difference between its records' sum at R and its value at
// R: every change after R moved the counter too, so the counter then
// equals the records' sum now, whatever happened meanwhile. A recount
// that finds the counter repaired since R (by another recount) leaves it
// alone, so two recounts never correct the same difference twice. Until
// the counted key exists, UploadBytesOf and ListUploadBytes answer
// ErrUncounted and callers sum the records themselves.
//
// Bound: a broker of an earlier version (during a rolling upgrade) writes
// records without moving the counters; the next recount (broker/largeobj
// runs one with each sweep) repairs what it changed.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// countedTxnAttempts bounds the retries of a transaction lost to other
// writers of the same counter (each loss is another writer's success).
const countedTxnAttempts = 64

// UploadBytes is one tenant's counter.
type UploadBytes struct {
	V      int    `json:"v"`
	Tenant string `json:"tenant"`
	// Open is the declared bytes of the tenant's open sessions.
	Open int64 `json:"open"`
	// Stored is the bytes of its completed and published objects.
	Stored int64 `json:"stored"`
	// Repairs counts the recounts' corrections.
	Repairs int64 `json:"repairs"`

	Revision int64 `json:"-"` // the mod revision when read; 0: absent
}

// UploadCharge is what record u counts: its size as open bytes while the
// session is open, as stored bytes once completed or published, nothing
// once aborted or expired.
func UploadCharge(u Upload) (open, stored int64) {
	switch u.State {
	case UploadOpen:
		return u.Size, 0
	case UploadCompleted, UploadPublished:
		return 0, u.Size
	}
	return 0, 0
}

// charge is what a record counted at a revision.
type charge struct {
	rev          int64 // the record's mod revision (0: unknown)
	tenant       string
	open, stored int64
}

func chargeOf(u Upload, rev int64) charge {
	o, st := UploadCharge(u)
	return charge{rev: rev, tenant: u.Tenant, open: o, stored: st}
}

func (s *Store) uploadBytesPrefix() string { return s.prefix + "upload-bytes/" }

func (s *Store) uploadBytesKey(tenant string) string {
	return s.uploadBytesPrefix() + url.PathEscape(tenant)
}

func (s *Store) uploadBytesCountedKey() string { return s.prefix + "upload-bytes-counted" }

func decodeUploadBytes(key string, val []byte, rev int64) (UploadBytes, error) {
	var c UploadBytes
	if err := json.Unmarshal(val, &c); err != nil {
		return UploadBytes{}, fmt.Errorf("meta: upload bytes %s: %w: %w", key, err, ErrCorrupt)
	}
	switch {
	case c.V != 1:
		return UploadBytes{}, fmt.Errorf("meta: upload bytes %s: version %d: %w", key, c.V, ErrUnknownVersion)
	case c.Tenant == "" || c.Repairs < 0:
		return UploadBytes{}, fmt.Errorf("meta: upload bytes %s: tenant %q, repairs %d: %w", key, c.Tenant, c.Repairs, ErrCorrupt)
	}
	c.Revision = rev
	return c, nil
}

// uploadBytesFrom decodes the counter of tenant from a range answer (zero
// when absent).
func uploadBytesFrom(key, tenant string, kvs []*mvccpb.KeyValue) (UploadBytes, error) {
	if len(kvs) == 0 {
		return UploadBytes{V: 1, Tenant: tenant}, nil
	}
	return decodeUploadBytes(key, kvs[0].Value, kvs[0].ModRevision)
}

func (s *Store) putUploadBytesOp(c UploadBytes) (clientv3.Op, error) {
	c.V = 1
	b, err := json.Marshal(c)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("meta: encode upload bytes of %q: %w", c.Tenant, err)
	}
	return clientv3.OpPut(s.uploadBytesKey(c.Tenant), string(b)), nil
}

// chargeBefore is what u's record counted at u.Revision: known from the
// read that gave u, or read now. A record gone or changed since answers
// what it holds now; the caller's transaction, conditioned on u.Revision,
// then fails without writing.
func (s *Store) chargeBefore(ctx context.Context, u Upload) (charge, error) {
	if u.read.rev != 0 && u.read.rev == u.Revision {
		return u.read, nil
	}
	key := s.uploadKey(u.ID)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return charge{}, fmt.Errorf("meta: read upload %q: %w", u.ID, err)
	}
	if len(resp.Kvs) == 0 {
		return charge{}, nil
	}
	prev, err := decodeUpload(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return charge{}, err
	}
	return prev.read, nil
}

// countedTxn commits the write of one upload record: then under cmps, and
// with them the change of the counters from what the record counted
// before to what it counts after. orElse are the caller's Else operations,
// answered first in a failed response. A transaction that failed while a
// counter it read had moved is retried with the counters as the failure
// answered them; any other failure is answered to the caller, who reads
// it as before the counters existed. Writers of one process take turns
// (counterLocks), so only other processes' writes make one retry: left
// to race, a few writers in one broker starved each other of the counter
// for 64 attempts in a row.
func (s *Store) countedTxn(ctx context.Context, cmps []clientv3.Cmp, then, orElse []clientv3.Op, before, after charge) (*clientv3.TxnResponse, error) {
	deltas := map[string][2]int64{}
	if before.tenant != "" {
		d := deltas[before.tenant]
		d[0], d[1] = d[0]-before.open, d[1]-before.stored
		deltas[before.tenant] = d
	}
	if after.tenant != "" {
		d := deltas[after.tenant]
		d[0], d[1] = d[0]+after.open, d[1]+after.stored
		deltas[after.tenant] = d
	}
	var tenants []string
	for t, d := range deltas {
		if d != [2]int64{} {
			tenants = append(tenants, t)
		}
	}
	if len(tenants) == 0 {
		return s.client.Txn(ctx).If(cmps...).Then(then...).Else(orElse...).Commit()
	}
	slices.Sort(tenants)
	defer s.counters.lock(tenants)()
	counters := make([]UploadBytes, len(tenants))
	for i, t := range tenants {
		key := s.uploadBytesKey(t)
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("meta: read upload bytes of %q: %w", t, err)
		}
		if counters[i], err = uploadBytesFrom(key, t, resp.Kvs); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		c := slices.Clone(cmps)
		ops := slices.Clone(then)
		els := slices.Clone(orElse)
		for i, t := range tenants {
			next := counters[i]
			next.Open += deltas[t][0]
			next.Stored += deltas[t][1]
			op, err := s.putUploadBytesOp(next)
			if err != nil {
				return nil, err
			}
			key := s.uploadBytesKey(t)
			c = append(c, clientv3.Compare(clientv3.ModRevision(key), "=", counters[i].Revision))
			ops = append(ops, op)
			els = append(els, clientv3.OpGet(key))
		}
		resp, err := s.client.Txn(ctx).If(c...).Then(ops...).Else(els...).Commit()
		if err != nil || resp.Succeeded {
			return resp, err
		}
		moved := false
		for i, t := range tenants {
			key := s.uploadBytesKey(t)
			now, err := uploadBytesFrom(key, t, resp.Responses[len(orElse)+i].GetResponseRange().GetKvs())
			if err != nil {
				return nil, err
			}
			moved = moved || now.Revision != counters[i].Revision
			counters[i] = now
		}
		if !moved {
			return resp, nil // the caller's own conditions failed
		}
		if attempt >= countedTxnAttempts {
			return nil, fmt.Errorf("meta: upload bytes of %v changed %d times meanwhile: %w", tenants, attempt, ErrConflict)
		}
		if err := counterBackoff(ctx, attempt); err != nil {
			return nil, fmt.Errorf("meta: upload bytes of %v: %w", tenants, err)
		}
	}
}

// counterLocks serialises the counted transactions of one process by
// tenant: a fixed set of stripes, a tenant's chosen by its name's hash.
type counterLocks [64]sync.Mutex

// lock takes the stripes of tenants (sorted) in index order, so two
// writers of overlapping tenant sets cannot deadlock, and returns their
// release.
func (l *counterLocks) lock(tenants []string) (unlock func()) {
	var idx []int
	for _, t := range tenants {
		h := fnv.New32a()
		_, _ = h.Write([]byte(t))
		idx = append(idx, int(h.Sum32()%uint32(len(l))))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		l[i].Lock()
	}
	return func() {
		for _, i := range idx {
			l[i].Unlock()
		}
	}
}

// counterBackoff waits a random while after the attempt-th loss to other
// writers of a counter, doubling as losses mount (from up to 1 ms to up
// to 64 ms), so writers racing for one counter spread out.
func counterBackoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(1 + rand.Int64N(int64(time.Millisecond)<<min(attempt-1, 6))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// UploadBytesOf is tenant's counter (zero when it has none), in one
// request; ErrUncounted before the counters are complete.
func (s *Store) UploadBytesOf(ctx context.Context, tenant string) (UploadBytes, error) {
	key := s.uploadBytesKey(tenant)
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.uploadBytesCountedKey(), clientv3.WithKeysOnly()), clientv3.OpGet(key)).Commit()
	if err != nil {
		return UploadBytes{}, fmt.Errorf("meta: read upload bytes of %q: %w", tenant, err)
	}
	if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
		return UploadBytes{}, fmt.Errorf("meta: upload bytes of %q: %w", tenant, ErrUncounted)
	}
	return uploadBytesFrom(key, tenant, resp.Responses[1].GetResponseRange().GetKvs())
}

// ListUploadBytes is every counter by tenant (one per tenant that ever
// had a session), in one request; ErrUncounted before the counters are
// complete.
func (s *Store) ListUploadBytes(ctx context.Context) (map[string]UploadBytes, error) {
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.uploadBytesCountedKey(), clientv3.WithKeysOnly()),
		clientv3.OpGet(s.uploadBytesPrefix(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, fmt.Errorf("meta: list upload bytes: %w", err)
	}
	if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
		return nil, fmt.Errorf("meta: list upload bytes: %w", ErrUncounted)
	}
	out := make(map[string]UploadBytes)
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		c, err := decodeUploadBytes(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out[c.Tenant] = c
	}
	return out, nil
}

// ReconcileUploadBytes recounts: uploads must be every upload record at
// revision rev (ListUploadsAt), and each counter is corrected by the
// difference between its records' sum and its own value at rev (see the
// head of this file). It answers how many counters it corrected; once
// every difference is settled it writes the counted key, if absent.
func (s *Store) ReconcileUploadBytes(ctx context.Context, rev int64, uploads []Upload) (int, error) {
	truth := map[string][2]int64{}
	for _, u := range uploads {
		o, st := UploadCharge(u)
		d := truth[u.Tenant]
		d[0], d[1] = d[0]+o, d[1]+st
		truth[u.Tenant] = d
	}
	resp, err := s.client.Get(ctx, s.uploadBytesPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return 0, fmt.Errorf("meta: read upload bytes at revision %d: %w", rev, err)
	}
	at := map[string]UploadBytes{}
	for _, kv := range resp.Kvs {
		c, err := decodeUploadBytes(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			return 0, err
		}
		at[c.Tenant] = c
	}
	var tenants []string
	for t := range truth {
		tenants = append(tenants, t)
	}
	for t := range at {
		if _, ok := truth[t]; !ok {
			tenants = append(tenants, t)
		}
	}
	slices.Sort(tenants)
	repaired := 0
	for _, t := range tenants {
		c := at[t]
		d := [2]int64{truth[t][0] - c.Open, truth[t][1] - c.Stored}
		if d == [2]int64{} {
			continue
		}
		ok, err := s.repairUploadBytes(ctx, t, c.Repairs, d)
		if err != nil {
			return repaired, err
		}
		if ok {
			repaired++
		}
	}
	if _, err := s.createOnce(ctx, s.uploadBytesCountedKey(), strconv.FormatInt(rev, 10)); err != nil {
		return repaired, fmt.Errorf("meta: mark the upload bytes counted: %w", err)
	}
	return repaired, nil
}

// repairUploadBytes adds d to tenant's counter unless a recount repaired
// it since the revision it had repairs at; false when it left it.
func (s *Store) repairUploadBytes(ctx context.Context, tenant string, repairs int64, d [2]int64) (bool, error) {
	key := s.uploadBytesKey(tenant)
	for attempt := 1; ; attempt++ {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return false, fmt.Errorf("meta: read upload bytes of %q: %w", tenant, err)
		}
		cur, err := uploadBytesFrom(key, tenant, resp.Kvs)
		if err != nil {
			return false, err
		}
		if cur.Repairs != repairs {
			return false, nil
		}
		rev := cur.Revision
		cur.Open, cur.Stored, cur.Repairs = cur.Open+d[0], cur.Stored+d[1], cur.Repairs+1
		op, err := s.putUploadBytesOp(cur)
		if err != nil {
			return false, err
		}
		tr, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
		if err != nil {
			return false, fmt.Errorf("meta: repair upload bytes of %q: %w", tenant, err)
		}
		if tr.Succeeded {
			return true, nil
		}
		if attempt >= countedTxnAttempts {
			return false, fmt.Errorf("meta: repair upload bytes of %q: changed %d times meanwhile: %w", tenant, attempt, ErrConflict)
		}
		if err := counterBackoff(ctx, attempt); err != nil {
			return false, fmt.Errorf("meta: repair upload bytes of %q: %w", tenant, err)
		}
	}
}
