package meta

// This file owns the records of large-payload upload sessions
// (broker/largeobj):
//
//	<prefix>uploads/<id>   {"v":1,"id","tenant","topic","size","sha256",
//	                        "content_type","enc_key_id","enc_alg","state",
//	                        "created_ms","expires_ms","object_key","upload_id",
//	                        "part_size","received","parts":[{"n","etag","size"}],
//	                        "hash_state","completed_ms","published_ms","reason",
//	                        "ledger","release_due_ms"}
//
// <id> is the session's reference (payload/ref.ValidID: safe as a key
// segment); it is random, so one key space serves every tenant and the
// record names its tenant. hash_state is the marshalled SHA-256 state
// (encoding.BinaryMarshaler of crypto/sha256) of the first "received"
// bytes, so any broker can take the next part.
//
// Invariant: a record is created only if absent, and changed or deleted
// only by a transaction conditioned on the mod revision it was read at
// (UpdateUpload, DeleteUpload): two brokers cannot both take the same part
// or the same transition; the loser gets ErrConflict.
// Invariant: every write of a record moves its tenant's byte counter
// (upload_bytes.go) in the same transaction by what the write changes in
// what the record counts.
// Invariant: the store checks the shape of a record (ValidateUpload) on
// every write and read; the rules of transitions are broker/largeobj's.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// UploadState is a session's state.
type UploadState string

// The states of an upload session. open → completed → published; open →
// aborted (by the client, a failed check, or its TTL); completed → expired
// (its TTL passed unpublished; the object is deleted).
const (
	UploadOpen      UploadState = "open"
	UploadCompleted UploadState = "completed"
	UploadPublished UploadState = "published"
	UploadAborted   UploadState = "aborted"
	UploadExpired   UploadState = "expired"
)

// UploadPart is one part uploaded through a broker.
type UploadPart struct {
	Number int32  `json:"n"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
}

// Upload is one session's record.
type Upload struct {
	V           int         `json:"v"`
	ID          string      `json:"id"`
	Tenant      string      `json:"tenant"`
	Topic       string      `json:"topic"`
	Size        int64       `json:"size"`
	SHA256      string      `json:"sha256"`
	ContentType string      `json:"content_type,omitempty"`
	KeyID       string      `json:"enc_key_id,omitempty"`
	Algorithm   string      `json:"enc_alg,omitempty"`
	State       UploadState `json:"state"`
	CreatedMs   int64       `json:"created_ms"`
	ExpiresMs   int64       `json:"expires_ms"`
	ObjectKey   string      `json:"object_key"`
	UploadID    string      `json:"upload_id"`
	PartSize    int64       `json:"part_size"`
	// Received is how many bytes came through brokers in order, hashed
	// into HashState; Parts are their parts.
	Received    int64        `json:"received"`
	Parts       []UploadPart `json:"parts,omitempty"`
	HashState   []byte       `json:"hash_state,omitempty"`
	CompletedMs int64        `json:"completed_ms,omitempty"`
	PublishedMs int64        `json:"published_ms,omitempty"`
	Reason      string       `json:"reason,omitempty"` // why aborted or expired
	// Ledger: the session was published by a claim that recorded its
	// reference in the ledger (largerefs.go); only such an object is ever
	// released by it (one published before the ledger existed is kept).
	Ledger bool `json:"ledger,omitempty"`
	// ReleaseDueMs, once set, condemns a published object: no live record
	// referenced it when it was set, claims are refused from then on, and
	// the object goes at that time (the grace period).
	ReleaseDueMs int64 `json:"release_due_ms,omitempty"`

	// Revision is the record's mod revision when read; UpdateUpload and
	// DeleteUpload are conditioned on it.
	Revision int64 `json:"-"`
	// read is what the record counted at Revision (upload_bytes.go), so
	// a write of a copy knows the difference it makes without reading
	// the record again; a copy whose Revision was changed by hand has it
	// read afresh.
	read charge
}

// ValidateUpload checks the shape of a record.
func ValidateUpload(u Upload) error {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("meta: upload %q: %s: %w", u.ID, fmt.Sprintf(why, args...), ErrCorrupt)
	}
	switch {
	case u.V != 1:
		return fmt.Errorf("meta: upload %q: version %d: %w", u.ID, u.V, ErrUnknownVersion)
	case u.ID == "" || len(u.ID) > 64 || strings.ContainsAny(u.ID, "/ "):
		return bad("bad id")
	case u.Tenant == "" || u.ObjectKey == "":
		return bad("no tenant or object key")
	case u.Size < 0 || u.Received < 0 || u.Received > u.Size || u.PartSize <= 0:
		return bad("size %d, received %d, part size %d", u.Size, u.Received, u.PartSize)
	}
	switch u.State {
	case UploadOpen, UploadCompleted, UploadPublished, UploadAborted, UploadExpired:
	default:
		return bad("unknown state %q", u.State)
	}
	return nil
}

func (s *Store) uploadsPrefix() string { return s.prefix + "uploads/" }

func (s *Store) uploadKey(id string) string { return s.uploadsPrefix() + id }

// CreateUpload stores a new session record; ErrExists if its id is taken.
func (s *Store) CreateUpload(ctx context.Context, u Upload) (Upload, error) {
	u.V = 1
	if err := ValidateUpload(u); err != nil {
		return Upload{}, err
	}
	b, err := json.Marshal(u)
	if err != nil {
		return Upload{}, fmt.Errorf("meta: encode upload %q: %w", u.ID, err)
	}
	key := s.uploadKey(u.ID)
	resp, err := s.countedTxn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(b))}, nil, charge{}, chargeOf(u, 0))
	if err != nil {
		return Upload{}, fmt.Errorf("meta: create upload %q: %w", u.ID, err)
	}
	if !resp.Succeeded {
		return Upload{}, fmt.Errorf("meta: create upload %q: %w", u.ID, ErrExists)
	}
	u.Revision = resp.Header.Revision
	u.read = chargeOf(u, u.Revision)
	return u, nil
}

func decodeUpload(key string, val []byte, rev int64) (Upload, error) {
	var u Upload
	if err := json.Unmarshal(val, &u); err != nil {
		return Upload{}, fmt.Errorf("meta: upload %s: %w: %w", key, err, ErrCorrupt)
	}
	if err := ValidateUpload(u); err != nil {
		return Upload{}, err
	}
	u.Revision = rev
	u.read = chargeOf(u, rev)
	return u, nil
}

// GetUpload reads a session; ErrNotFound if there is none.
func (s *Store) GetUpload(ctx context.Context, id string) (Upload, error) {
	key := s.uploadKey(id)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return Upload{}, fmt.Errorf("meta: read upload %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return Upload{}, fmt.Errorf("meta: upload %q: %w", id, ErrNotFound)
	}
	return decodeUpload(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// UpdateUpload writes u if its record is still at u.Revision: ErrConflict
// if it changed, ErrNotFound if it is gone. It returns u at its new revision.
func (s *Store) UpdateUpload(ctx context.Context, u Upload) (Upload, error) {
	u.V = 1
	if err := ValidateUpload(u); err != nil {
		return Upload{}, err
	}
	b, err := json.Marshal(u)
	if err != nil {
		return Upload{}, fmt.Errorf("meta: encode upload %q: %w", u.ID, err)
	}
	before, err := s.chargeBefore(ctx, u)
	if err != nil {
		return Upload{}, err
	}
	key := s.uploadKey(u.ID)
	resp, err := s.countedTxn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", u.Revision)},
		[]clientv3.Op{clientv3.OpPut(key, string(b))}, []clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())},
		before, chargeOf(u, 0))
	if err != nil {
		return Upload{}, fmt.Errorf("meta: update upload %q: %w", u.ID, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			return Upload{}, fmt.Errorf("meta: update upload %q: %w", u.ID, ErrNotFound)
		}
		return Upload{}, fmt.Errorf("meta: update upload %q at revision %d: %w", u.ID, u.Revision, ErrConflict)
	}
	u.Revision = resp.Header.Revision
	u.read = chargeOf(u, u.Revision)
	return u, nil
}

// DeleteUpload deletes u's record if it is still at u.Revision
// (ErrConflict otherwise); a record already gone is success.
func (s *Store) DeleteUpload(ctx context.Context, u Upload) error {
	before, err := s.chargeBefore(ctx, u)
	if err != nil {
		return err
	}
	key := s.uploadKey(u.ID)
	resp, err := s.countedTxn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", u.Revision)},
		[]clientv3.Op{clientv3.OpDelete(key)}, []clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())},
		before, charge{tenant: before.tenant})
	if err != nil {
		return fmt.Errorf("meta: delete upload %q: %w", u.ID, err)
	}
	if !resp.Succeeded && len(resp.Responses[0].GetResponseRange().GetKvs()) > 0 {
		return fmt.Errorf("meta: delete upload %q at revision %d: %w", u.ID, u.Revision, ErrConflict)
	}
	return nil
}

// ListUploads calls fn for every session record, by id, in pages. A record
// that cannot be decoded is reported to fn's caller as an error after the
// others were listed.
func (s *Store) ListUploads(ctx context.Context, fn func(Upload) error) error {
	_, err := s.listUploads(ctx, fn, false)
	return err
}

// ListUploadsAt is ListUploads with every page read at the revision of the
// first, which it answers: one consistent view (ReconcileUploadBytes takes
// it). A listing that outlives etcd's compaction of that revision fails.
func (s *Store) ListUploadsAt(ctx context.Context, fn func(Upload) error) (int64, error) {
	return s.listUploads(ctx, fn, true)
}

func (s *Store) listUploads(ctx context.Context, fn func(Upload) error, pin bool) (int64, error) {
	prefix := s.uploadsPrefix()
	from := prefix
	end := clientv3.GetPrefixRangeEnd(prefix)
	var bad error
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(500),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if pin && rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("meta: list uploads: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			u, err := decodeUpload(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				bad = err
				continue
			}
			if err := fn(u); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, bad
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
