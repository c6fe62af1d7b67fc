package meta

// This file owns HTTP API keys and ACL bindings: their JSON encoding and
// their transactions.
//
//	<prefix>security/api-keys/<id>          {"v":1,"id","user","hash","created_ms",
//	                                         "description"}
//	<prefix>security/acls/<tenant>/<hash>   {"v":1,"tenant","resource_type","resource_name",
//	                                         "pattern_type","principal","host","operation",
//	                                         "permission"}
//
// <id> is the caller's key id ([A-Za-z0-9._-]); "hash" is whatever digest of
// the secret the caller chose, never the secret. <hash> is aclHash of the
// binding: 32 hex digits of SHA-256 over its fields, so an identical binding
// has one key. The codes are Kafka's wire codes; this package stores them
// and leaves their meaning to the broker.
//
// Invariant: an API key names a user whose key existed when the API key was
// created, and DeleteUser deletes a user's API keys in the transaction that
// deletes the user, so no API key outlives its user.
// Invariant: a user has at most MaxAPIKeysPerUser API keys, so DeleteUser
// fits in one transaction.
// Invariant: an ACL key exists only while its tenant's key exists: CreateACLs
// is conditioned on the tenant, DeleteTenant deletes the tenant's bindings.
// Invariant: DeleteACLs deletes a binding only at the mod revision it read and
// matched, so a binding created or re-created after that read survives.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Limits of API keys and ACL bindings.
const (
	// MaxAPIKeysPerUser bounds a user's API keys.
	MaxAPIKeysPerUser    = 64
	maxAPIKeyIDLen       = 64
	maxAPIKeyHashLen     = 256
	maxAPIKeyDescription = 1024
	maxACLFieldLen       = 1024
)

// APIKey is an HTTP API key of a user: its id and a hash of its secret.
type APIKey struct {
	ID   string
	User string
	Hash []byte
	// Created is set by CreateAPIKey when zero.
	Created     time.Time
	Description string
}

// ACL is one ACL binding within a tenant, with Kafka's wire codes for the
// resource type, pattern type, operation and permission.
type ACL struct {
	Tenant       string
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

type apiKeyRecord struct {
	V           int    `json:"v"`
	ID          string `json:"id"`
	User        string `json:"user"`
	Hash        []byte `json:"hash"`
	CreatedMs   int64  `json:"created_ms"`
	Description string `json:"description,omitempty"`
}

type aclRecord struct {
	V            int    `json:"v"`
	Tenant       string `json:"tenant"`
	ResourceType int8   `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

func (r apiKeyRecord) version() int { return r.V }
func (r aclRecord) version() int    { return r.V }

func (s *Store) apiKeysPrefix() string           { return s.securityPrefix() + "api-keys/" }
func (s *Store) apiKeyKey(id string) string      { return s.apiKeysPrefix() + id }
func (s *Store) aclsRoot() string                { return s.securityPrefix() + "acls/" }
func (s *Store) aclsPrefix(tenant string) string { return s.aclsRoot() + tenant + "/" }
func (s *Store) aclKey(a ACL) string             { return s.aclsPrefix(a.Tenant) + aclHash(a) }

// aclHash identifies a binding by its content: length-prefixed strings and
// the codes, so no two different bindings share an encoding.
func aclHash(a ACL) string {
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	str := func(v string) {
		h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(v)))])
		h.Write([]byte(v))
	}
	str(a.Tenant)
	str(a.ResourceName)
	str(a.Principal)
	str(a.Host)
	h.Write([]byte{byte(a.ResourceType), byte(a.PatternType), byte(a.Operation), byte(a.Permission)})
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ValidateAPIKeyID accepts 1 to 64 characters of [A-Za-z0-9._-].
func ValidateAPIKeyID(id string) error {
	if id == "" || len(id) > maxAPIKeyIDLen {
		return fmt.Errorf("%w: API key id %q: 1 to %d characters of [A-Za-z0-9._-]", ErrInvalidName, id, maxAPIKeyIDLen)
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%w: API key id %q contains %q", ErrInvalidName, id, c)
		}
	}
	return nil
}

func validateAPIKey(k APIKey) error {
	if err := ValidateAPIKeyID(k.ID); err != nil {
		return err
	}
	if err := ValidateUserName(k.User); err != nil {
		return err
	}
	if len(k.Hash) == 0 || len(k.Hash) > maxAPIKeyHashLen {
		return fmt.Errorf("%w: API key %q: hash of %d bytes", ErrInvalidCredential, k.ID, len(k.Hash))
	}
	if len(k.Description) > maxAPIKeyDescription {
		return fmt.Errorf("%w: API key %q: description of %d bytes (at most %d)", ErrInvalidName, k.ID, len(k.Description), maxAPIKeyDescription)
	}
	return nil
}

func validateACL(a ACL) error {
	if err := ValidateTenantName(a.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidACL, err)
	}
	for _, f := range []struct{ name, v string }{{"resource name", a.ResourceName}, {"principal", a.Principal}, {"host", a.Host}} {
		if f.v == "" || len(f.v) > maxACLFieldLen {
			return fmt.Errorf("%w: %s of %d bytes (1 to %d)", ErrInvalidACL, f.name, len(f.v), maxACLFieldLen)
		}
	}
	return nil
}

func (s *Store) encodeAPIKey(k APIKey) (string, error) {
	return encodeRecord("API key "+k.ID, apiKeyRecord{
		V: securityRecordVersion, ID: k.ID, User: k.User, Hash: k.Hash,
		CreatedMs: k.Created.UnixMilli(), Description: k.Description,
	})
}

func (s *Store) decodeAPIKey(key string, val []byte) (APIKey, error) {
	r, err := decodeRecord[apiKeyRecord](key, val)
	if err != nil {
		return APIKey{}, err
	}
	k := APIKey{ID: r.ID, User: r.User, Hash: r.Hash, Created: time.UnixMilli(r.CreatedMs), Description: r.Description}
	if validateAPIKey(k) != nil || s.apiKeyKey(k.ID) != key {
		return APIKey{}, fmt.Errorf("meta: decode %s: API key %q: %w", key, k.ID, ErrCorrupt)
	}
	return k, nil
}

func (s *Store) encodeACL(a ACL) (string, error) {
	return encodeRecord("ACL binding", aclRecord{
		V: securityRecordVersion, Tenant: a.Tenant, ResourceType: a.ResourceType, ResourceName: a.ResourceName,
		PatternType: a.PatternType, Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.Permission,
	})
}

func (s *Store) decodeACL(key string, val []byte) (ACL, error) {
	r, err := decodeRecord[aclRecord](key, val)
	if err != nil {
		return ACL{}, err
	}
	a := ACL{
		Tenant: r.Tenant, ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.PatternType,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.Permission,
	}
	if validateACL(a) != nil || s.aclKey(a) != key {
		return ACL{}, fmt.Errorf("meta: decode %s: ACL binding %+v: %w", key, a, ErrCorrupt)
	}
	return a, nil
}

// CreateAPIKey stores a new API key of an existing user: ErrExists if the
// id is taken, ErrNotFound if the user does not exist, ErrLimit if it has
// MaxAPIKeysPerUser keys already. Created is set to now when zero.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey) (APIKey, error) {
	if err := validateAPIKey(k); err != nil {
		return APIKey{}, fmt.Errorf("meta: create API key: %w", err)
	}
	k.Created = createdOrNow(k.Created)
	val, err := s.encodeAPIKey(k)
	if err != nil {
		return APIKey{}, err
	}
	key, ukey := s.apiKeyKey(k.ID), s.userKey(k.User)
	for range maxSecurityAttempts {
		resp, err := s.client.Txn(ctx).Then(
			clientv3.OpGet(ukey, clientv3.WithKeysOnly()),
			clientv3.OpGet(s.apiKeysPrefix(), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return APIKey{}, fmt.Errorf("meta: create API key %q: %w", k.ID, err)
		}
		rev := resp.Header.Revision
		ukvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(ukvs) == 0 {
			return APIKey{}, fmt.Errorf("meta: create API key %q: user %q: %w", k.ID, k.User, ErrNotFound)
		}
		owned := 0
		for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
			if string(kv.Key) == key {
				return APIKey{}, fmt.Errorf("meta: create API key %q: %w", k.ID, ErrExists)
			}
			if other, err := s.decodeAPIKey(string(kv.Key), kv.Value); err == nil && other.User == k.User {
				owned++
			}
		}
		if owned >= MaxAPIKeysPerUser {
			return APIKey{}, fmt.Errorf("meta: create API key %q: user %q has %d: %w", k.ID, k.User, owned, ErrLimit)
		}
		// The user is the one read, and no API key changed since the read
		// (the count stands, and the id is still free).
		tx, err := s.client.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(ukey), "=", ukvs[0].CreateRevision),
				clientv3.Compare(clientv3.ModRevision(s.apiKeysPrefix()), "<", rev+1).WithPrefix(),
			).
			Then(clientv3.OpPut(key, val)).
			Commit()
		if err != nil {
			return APIKey{}, fmt.Errorf("meta: create API key %q: %w", k.ID, err)
		}
		if tx.Succeeded {
			return s.decodeAPIKey(key, []byte(val))
		}
	}
	return APIKey{}, fmt.Errorf("meta: create API key %q: API keys changed %d times meanwhile: %w", k.ID, maxSecurityAttempts, ErrConflict)
}

// GetAPIKey reads one API key; ErrNotFound if there is none of that id.
func (s *Store) GetAPIKey(ctx context.Context, id string) (APIKey, error) {
	if err := ValidateAPIKeyID(id); err != nil {
		return APIKey{}, fmt.Errorf("meta: get API key: %w", err)
	}
	key := s.apiKeyKey(id)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return APIKey{}, fmt.Errorf("meta: get API key %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return APIKey{}, fmt.Errorf("meta: get API key %q: %w", id, ErrNotFound)
	}
	return s.decodeAPIKey(key, resp.Kvs[0].Value)
}

// ListAPIKeys lists the API keys of user ("" for every user), sorted by id.
func (s *Store) ListAPIKeys(ctx context.Context, user string) ([]APIKey, error) {
	resp, err := s.client.Get(ctx, s.apiKeysPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list API keys: %w", err)
	}
	var out []APIKey
	for _, kv := range resp.Kvs {
		k, err := s.decodeAPIKey(string(kv.Key), kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list API keys: %w", err)
		}
		if user == "" || k.User == user {
			out = append(out, k)
		}
	}
	return out, nil // in key order, which is id order
}

// DeleteAPIKey deletes one API key; ErrNotFound if there is none of that id.
func (s *Store) DeleteAPIKey(ctx context.Context, id string) error {
	if err := ValidateAPIKeyID(id); err != nil {
		return fmt.Errorf("meta: delete API key: %w", err)
	}
	resp, err := s.client.Delete(ctx, s.apiKeyKey(id))
	if err != nil {
		return fmt.Errorf("meta: delete API key %q: %w", id, err)
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("meta: delete API key %q: %w", id, ErrNotFound)
	}
	return nil
}

// aclChunk is how many bindings one transaction carries: each is a nested
// transaction, and etcd counts the outer operations and the nested ones
// against the same limit.
func (s *Store) aclChunk() int { return max(1, s.maxTxnOps/2) }

// CreateACLs stores bindings; one identical to a stored binding (or to
// another in the list) is stored once, and creating it again succeeds.
// ErrNotFound if a binding's tenant does not exist. Bindings are written
// in transactions of up to half the store's MaxTxnOps, in order; each is
// atomic, the whole list is not.
func (s *Store) CreateACLs(ctx context.Context, acls []ACL) error {
	keys := make([]string, 0, len(acls))
	vals := make(map[string]string, len(acls))
	tenantOf := make(map[string]string, len(acls))
	for _, a := range acls {
		if err := validateACL(a); err != nil {
			return fmt.Errorf("meta: create ACLs: %w", err)
		}
		key := s.aclKey(a)
		if _, dup := vals[key]; dup {
			continue
		}
		val, err := s.encodeACL(a)
		if err != nil {
			return err
		}
		keys = append(keys, key)
		vals[key], tenantOf[key] = val, a.Tenant
	}
	for chunk := range slices.Chunk(keys, s.aclChunk()) {
		var tenants []string
		var puts []clientv3.Op
		for _, key := range chunk {
			if !slices.Contains(tenants, tenantOf[key]) {
				tenants = append(tenants, tenantOf[key])
			}
			puts = append(puts, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(key, vals[key])}, nil))
		}
		var exist []clientv3.Cmp
		var counts []clientv3.Op
		for _, t := range tenants {
			exist = append(exist, clientv3.Compare(clientv3.CreateRevision(s.tenantKey(t)), "!=", 0))
			counts = append(counts, clientv3.OpGet(s.tenantKey(t), clientv3.WithCountOnly()))
		}
		resp, err := s.client.Txn(ctx).If(exist...).Then(puts...).Else(counts...).Commit()
		if err != nil {
			return fmt.Errorf("meta: create ACLs: %w", err)
		}
		if !resp.Succeeded {
			var missing []string
			for i, r := range resp.Responses {
				if r.GetResponseRange().GetCount() == 0 {
					missing = append(missing, tenants[i])
				}
			}
			return fmt.Errorf("meta: create ACLs: tenant %s: %w", strings.Join(missing, ", "), ErrNotFound)
		}
	}
	return nil
}

// ListACLs lists the bindings of tenant ("" for every tenant), by tenant.
func (s *Store) ListACLs(ctx context.Context, tenant string) ([]ACL, error) {
	prefix := s.aclsRoot()
	if tenant != "" {
		if err := ValidateTenantName(tenant); err != nil {
			return nil, fmt.Errorf("meta: list ACLs: %w", err)
		}
		prefix = s.aclsPrefix(tenant)
	}
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list ACLs: %w", err)
	}
	out := make([]ACL, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		a, err := s.decodeACL(string(kv.Key), kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list ACLs: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// DeleteACLs deletes the stored bindings for which match is true and
// returns those it deleted. Each is deleted only if it is still the
// binding read (same mod revision): one deleted by someone else meanwhile
// is not returned, and one created again meanwhile stays. Undecodable
// bindings are logged and left alone. Matches are deleted in transactions
// of up to half the store's MaxTxnOps; after an error, those already
// deleted are returned with it.
func (s *Store) DeleteACLs(ctx context.Context, match func(ACL) bool) ([]ACL, error) {
	if match == nil {
		return nil, fmt.Errorf("meta: delete ACLs: %w: no filter", ErrInvalidACL)
	}
	resp, err := s.client.Get(ctx, s.aclsRoot(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: delete ACLs: %w", err)
	}
	type candidate struct {
		key string
		rev int64
		acl ACL
	}
	var cands []candidate
	for _, kv := range resp.Kvs {
		a, err := s.decodeACL(string(kv.Key), kv.Value)
		if err != nil {
			s.log.Error().Err(err).Msg("delete ACLs: skipping undecodable binding")
			continue
		}
		if match(a) {
			cands = append(cands, candidate{string(kv.Key), kv.ModRevision, a})
		}
	}
	var deleted []ACL
	for chunk := range slices.Chunk(cands, s.aclChunk()) {
		ops := make([]clientv3.Op, 0, len(chunk))
		for _, c := range chunk {
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev)},
				[]clientv3.Op{clientv3.OpDelete(c.key)}, nil))
		}
		tx, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return deleted, fmt.Errorf("meta: delete ACLs: %w", err)
		}
		for i, r := range tx.Responses {
			if nested := r.GetResponseTxn(); nested != nil && nested.Succeeded {
				deleted = append(deleted, chunk[i].acl)
			}
		}
	}
	return deleted, nil
}
