package meta

// This file owns the records of shared clusters' identities: tenants and
// users (with their SCRAM credentials and role), their JSON encoding and
// their transactions. API keys and ACL bindings are in security_acl.go, the
// watch cache of all four in security_watch.go.
//
//	<prefix>security/tenants/<name>         {"v":1,"name","pool"?,"created_ms"}
//	<prefix>security/users/<user>           {"v":1,"name","tenant","role","scram":
//	                                         {"<mechanism>":{"salt","stored_key",
//	                                         "server_key","iterations"}},"created_ms"}
//
// <user> is path-escaped (url.PathEscape); tenant names need no escaping.
// Byte fields are standard base64 (encoding/json's form of []byte).
//
// Invariant: nothing here stores a password or a raw API key: only what the
// caller derived from one (SCRAM salted keys, key hashes).
// Invariant: a username is unique in the cluster (one key per user, created
// only if absent), and a user key names a tenant whose key existed when the
// user was created; DeleteTenant refuses while any user names the tenant.
// Invariant: every read-modify-write is a transaction conditioned on the
// revisions it read, retried a bounded number of times (ErrConflict after).
//
// Every record under <prefix>security/ decodes only if its key is the one
// its content names, so a reader can trust the key and the record alike.
//
// Nothing here keeps state between calls; the Store's client is safe for
// concurrent use.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// securityRecordVersion is the "v" field this build writes and reads in
// every record under <prefix>security/.
const securityRecordVersion = 1

// SystemTenant is the tenant of the operators' super users; it and
// DefaultTenant exist implicitly (EnsureTenant creates them at start-up).
const SystemTenant = "system"

// Roles a user may hold.
const (
	RoleUser        = ""             // an ordinary user: what the ACLs of its tenant allow
	RoleTenantAdmin = "tenant-admin" // may manage the users and ACLs of its own tenant
	RoleSuper       = "super"        // may do anything in every tenant
)

// SCRAM mechanisms, as Kafka names them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Limits on names.
const (
	maxTenantNameLen = 64
	maxUserNameLen   = 255
	maxScramSaltLen  = 1024
	// maxSecurityAttempts bounds the retries of a read-modify-write that
	// keeps losing to concurrent writers.
	maxSecurityAttempts = 8
)

// Tenant is one team's namespace in a shared cluster.
type Tenant struct {
	Name string
	// Pool is the broker pool the tenant's new partitions are placed in;
	// "" (a tenant bound to none, or a record from before pools) is
	// DefaultPool.
	Pool    string
	Created time.Time
}

// ScramKeys is one SCRAM credential as RFC 5802 keeps it on the server: the
// salt and iteration count, and the keys derived from the salted password.
type ScramKeys struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// User is a principal that belongs to one tenant.
type User struct {
	Name   string
	Tenant string
	Role   string               // RoleUser, RoleTenantAdmin or RoleSuper
	Scram  map[string]ScramKeys // by mechanism (ScramSHA256, ScramSHA512)
	// Created is set by CreateUser when zero.
	Created time.Time
}

type tenantRecord struct {
	V         int    `json:"v"`
	Name      string `json:"name"`
	Pool      string `json:"pool,omitempty"` // added within version 1; absent is DefaultPool
	CreatedMs int64  `json:"created_ms"`
}

type scramRecord struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int    `json:"iterations"`
}

type userRecord struct {
	V         int                    `json:"v"`
	Name      string                 `json:"name"`
	Tenant    string                 `json:"tenant"`
	Role      string                 `json:"role,omitempty"`
	Scram     map[string]scramRecord `json:"scram,omitempty"`
	CreatedMs int64                  `json:"created_ms"`
}

func (r tenantRecord) version() int { return r.V }
func (r userRecord) version() int   { return r.V }

func (s *Store) securityPrefix() string { return s.prefix + "security/" }
func (s *Store) tenantsPrefix() string  { return s.securityPrefix() + "tenants/" }
func (s *Store) usersPrefix() string    { return s.securityPrefix() + "users/" }
func (s *Store) tenantKey(name string) string {
	return s.tenantsPrefix() + name
}
func (s *Store) userKey(name string) string {
	return s.usersPrefix() + url.PathEscape(name)
}

// ValidateTenantName accepts 1 to 64 characters of [a-z0-9_-] starting
// with a letter.
func ValidateTenantName(name string) error {
	if name == "" || len(name) > maxTenantNameLen || name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("%w: tenant %q: 1 to %d characters of [a-z0-9_-], starting with a letter", ErrInvalidName, name, maxTenantNameLen)
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return fmt.Errorf("%w: tenant %q contains %q", ErrInvalidName, name, c)
		}
	}
	return nil
}

// IsReservedTenant reports whether name is one of the tenants that exist
// implicitly (SystemTenant, DefaultTenant): they cannot be created or
// deleted by hand.
func IsReservedTenant(name string) bool { return name == SystemTenant || name == DefaultTenant }

// ValidateUserName accepts 1 to 255 bytes of UTF-8 without control
// characters. SCRAM's escaping of ',' and '=' is the wire's business.
func ValidateUserName(name string) error {
	if name == "" || len(name) > maxUserNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("%w: user %q: 1 to %d bytes of UTF-8", ErrInvalidName, name, maxUserNameLen)
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: user %q contains a control character", ErrInvalidName, name)
	}
	return nil
}

// scramKeyLen is the length of StoredKey and ServerKey for each mechanism:
// the size of its hash.
func scramKeyLen(mechanism string) (int, bool) {
	switch mechanism {
	case ScramSHA256:
		return 32, true
	case ScramSHA512:
		return 64, true
	}
	return 0, false
}

func validateScram(mechanism string, k ScramKeys) error {
	n, ok := scramKeyLen(mechanism)
	if !ok {
		return fmt.Errorf("%w: SCRAM mechanism %q (want %s or %s)", ErrInvalidName, mechanism, ScramSHA256, ScramSHA512)
	}
	switch {
	case len(k.Salt) == 0 || len(k.Salt) > maxScramSaltLen:
		return fmt.Errorf("%w: %s salt of %d bytes", ErrInvalidCredential, mechanism, len(k.Salt))
	case k.Iterations <= 0:
		return fmt.Errorf("%w: %s iterations %d", ErrInvalidCredential, mechanism, k.Iterations)
	case len(k.StoredKey) != n || len(k.ServerKey) != n:
		return fmt.Errorf("%w: %s keys of %d and %d bytes, want %d", ErrInvalidCredential, mechanism, len(k.StoredKey), len(k.ServerKey), n)
	}
	return nil
}

func validateRole(role string) error {
	switch role {
	case RoleUser, RoleTenantAdmin, RoleSuper:
		return nil
	}
	return fmt.Errorf("%w: role %q (want %q, %q or %q)", ErrInvalidName, role, RoleUser, RoleTenantAdmin, RoleSuper)
}

func validateUser(u User) error {
	if err := ValidateUserName(u.Name); err != nil {
		return err
	}
	if err := ValidateTenantName(u.Tenant); err != nil {
		return err
	}
	if err := validateRole(u.Role); err != nil {
		return err
	}
	for mech, k := range u.Scram {
		if err := validateScram(mech, k); err != nil {
			return err
		}
	}
	return nil
}

// versioned is a record with a "v" field.
type versioned interface{ version() int }

// decodeRecord decodes a record of this build's version stored under key.
func decodeRecord[R versioned](key string, val []byte) (R, error) {
	var r R
	if err := json.Unmarshal(val, &r); err != nil {
		return r, fmt.Errorf("meta: decode %s: %w: %w", key, ErrCorrupt, err)
	}
	switch v := r.version(); {
	case v > securityRecordVersion:
		return r, fmt.Errorf("meta: decode %s: version %d, this build knows %d: %w", key, v, securityRecordVersion, ErrUnknownVersion)
	case v != securityRecordVersion:
		return r, fmt.Errorf("meta: decode %s: version %d: %w", key, v, ErrCorrupt)
	}
	return r, nil
}

func encodeRecord(what string, r any) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("meta: encode %s: %w", what, err)
	}
	return string(b), nil
}

func createdOrNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.UnixMilli(time.Now().UnixMilli())
	}
	return time.UnixMilli(t.UnixMilli()) // what a reader will see
}

func (s *Store) encodeTenant(t Tenant) (string, error) {
	return encodeRecord("tenant "+t.Name, tenantRecord{V: securityRecordVersion, Name: t.Name,
		Pool: omitDefaultPool(t.Pool), CreatedMs: t.Created.UnixMilli()})
}

func (s *Store) decodeTenant(key string, val []byte) (Tenant, error) {
	r, err := decodeRecord[tenantRecord](key, val)
	if err != nil {
		return Tenant{}, err
	}
	if ValidateTenantName(r.Name) != nil || s.tenantKey(r.Name) != key || r.Pool != "" && ValidatePoolName(r.Pool) != nil {
		return Tenant{}, fmt.Errorf("meta: decode %s: tenant %q: %w", key, r.Name, ErrCorrupt)
	}
	return Tenant{Name: r.Name, Pool: omitDefaultPool(r.Pool), Created: time.UnixMilli(r.CreatedMs)}, nil
}

func (s *Store) encodeUser(u User) (string, error) {
	r := userRecord{V: securityRecordVersion, Name: u.Name, Tenant: u.Tenant, Role: u.Role, CreatedMs: u.Created.UnixMilli()}
	if len(u.Scram) > 0 {
		r.Scram = make(map[string]scramRecord, len(u.Scram))
		for mech, k := range u.Scram {
			r.Scram[mech] = scramRecord(k)
		}
	}
	return encodeRecord("user "+u.Name, r)
}

func (s *Store) decodeUser(key string, val []byte) (User, error) {
	r, err := decodeRecord[userRecord](key, val)
	if err != nil {
		return User{}, err
	}
	u := User{Name: r.Name, Tenant: r.Tenant, Role: r.Role, Created: time.UnixMilli(r.CreatedMs), Scram: make(map[string]ScramKeys, len(r.Scram))}
	for mech, k := range r.Scram {
		u.Scram[mech] = ScramKeys(k)
	}
	if err := validateUser(u); err != nil || s.userKey(u.Name) != key {
		return User{}, fmt.Errorf("meta: decode %s: user %q: %w", key, u.Name, ErrCorrupt)
	}
	return u, nil
}

// CreateTenant stores a new tenant: ErrExists if it is already there (a
// reserved name always is, and also wraps ErrReserved).
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	return s.CreateTenantInPool(ctx, name, "")
}

// CreateTenantInPool is CreateTenant with the tenant bound to pool ("" or
// DefaultPool: bound to none).
func (s *Store) CreateTenantInPool(ctx context.Context, name, pool string) (Tenant, error) {
	if err := ValidateTenantName(name); err != nil {
		return Tenant{}, fmt.Errorf("meta: create tenant: %w", err)
	}
	if IsReservedTenant(name) {
		return Tenant{}, fmt.Errorf("meta: create tenant %q: %w: %w (it exists implicitly)", name, ErrExists, ErrReserved)
	}
	if pool != "" {
		if err := ValidatePoolName(pool); err != nil {
			return Tenant{}, fmt.Errorf("meta: create tenant %q: %w", name, err)
		}
	}
	t := Tenant{Name: name, Pool: omitDefaultPool(pool), Created: createdOrNow(time.Time{})}
	val, err := s.encodeTenant(t)
	if err != nil {
		return Tenant{}, err
	}
	key := s.tenantKey(name)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).
		Commit()
	if err != nil {
		return Tenant{}, fmt.Errorf("meta: create tenant %q: %w", name, err)
	}
	if !resp.Succeeded {
		return Tenant{}, fmt.Errorf("meta: create tenant %q: %w", name, ErrExists)
	}
	return t, nil
}

// EnsureTenant returns the tenant of that name, creating it if it is
// missing. Idempotent; start-up calls it for SystemTenant and DefaultTenant.
func (s *Store) EnsureTenant(ctx context.Context, name string) (Tenant, error) {
	if err := ValidateTenantName(name); err != nil {
		return Tenant{}, fmt.Errorf("meta: ensure tenant: %w", err)
	}
	t := Tenant{Name: name, Created: createdOrNow(time.Time{})}
	val, err := s.encodeTenant(t)
	if err != nil {
		return Tenant{}, err
	}
	key := s.tenantKey(name)
	stored, err := s.createOnce(ctx, key, val)
	if err != nil {
		return Tenant{}, fmt.Errorf("meta: ensure tenant %q: %w", name, err)
	}
	return s.decodeTenant(key, []byte(stored))
}

// GetTenant reads one tenant; ErrNotFound if there is none of that name.
func (s *Store) GetTenant(ctx context.Context, name string) (Tenant, error) {
	if err := ValidateTenantName(name); err != nil {
		return Tenant{}, fmt.Errorf("meta: get tenant: %w", err)
	}
	key := s.tenantKey(name)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return Tenant{}, fmt.Errorf("meta: get tenant %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return Tenant{}, fmt.Errorf("meta: get tenant %q: %w", name, ErrNotFound)
	}
	return s.decodeTenant(key, resp.Kvs[0].Value)
}

// ListTenants lists every stored tenant, sorted by name.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	resp, err := s.client.Get(ctx, s.tenantsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list tenants: %w", err)
	}
	out := make([]Tenant, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		t, err := s.decodeTenant(string(kv.Key), kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list tenants: %w", err)
		}
		out = append(out, t)
	}
	return out, nil // etcd returns keys in order, and a key is its name
}

// DeleteTenant deletes a tenant and, in the same transaction, its ACL
// bindings and its quota record (a tenant created later under the name
// starts without them).
// It refuses with ErrNotEmpty while any user belongs to the tenant (its
// topics are the caller's to check first), ErrReserved for SystemTenant
// and DefaultTenant, ErrNotFound if there is none.
func (s *Store) DeleteTenant(ctx context.Context, name string) error {
	if err := ValidateTenantName(name); err != nil {
		return fmt.Errorf("meta: delete tenant: %w", err)
	}
	if IsReservedTenant(name) {
		return fmt.Errorf("meta: delete tenant %q: %w", name, ErrReserved)
	}
	key := s.tenantKey(name)
	for range maxSecurityAttempts {
		// The tenant and every user at one revision.
		resp, err := s.client.Txn(ctx).Then(
			clientv3.OpGet(key),
			clientv3.OpGet(s.usersPrefix(), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return fmt.Errorf("meta: delete tenant %q: %w", name, err)
		}
		rev := resp.Header.Revision
		tkvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(tkvs) == 0 {
			return fmt.Errorf("meta: delete tenant %q: %w", name, ErrNotFound)
		}
		var members []string
		for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
			u, err := s.decodeUser(string(kv.Key), kv.Value)
			if err != nil {
				return fmt.Errorf("meta: delete tenant %q: %w", name, err)
			}
			if u.Tenant == name {
				members = append(members, u.Name)
			}
		}
		if len(members) > 0 {
			return fmt.Errorf("meta: delete tenant %q: %w: it still has %d users (%s); delete them first",
				name, ErrNotEmpty, len(members), strings.Join(firstN(members, 5), ", "))
		}
		// No user key changed since the read: a user created meanwhile
		// (necessarily after rev) fails the second compare.
		tx, err := s.client.Txn(ctx).
			If(
				clientv3.Compare(clientv3.ModRevision(key), "=", tkvs[0].ModRevision),
				clientv3.Compare(clientv3.ModRevision(s.usersPrefix()), "<", rev+1).WithPrefix(),
			).
			Then(
				clientv3.OpDelete(key),
				clientv3.OpDelete(s.aclsPrefix(name), clientv3.WithPrefix()),
				clientv3.OpDelete(s.quotaKey(name)), // quota.go
			).
			Commit()
		if err != nil {
			return fmt.Errorf("meta: delete tenant %q: %w", name, err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("meta: delete tenant %q: users changed %d times while deleting: %w", name, maxSecurityAttempts, ErrConflict)
}

func firstN(names []string, n int) []string {
	if len(names) > n {
		return append(names[:n:n], "...")
	}
	return names
}

// CreateUser stores a new user in an existing tenant: ErrExists if the
// username is taken in any tenant, ErrNotFound if the tenant does not
// exist. Created is set to now when zero. The returned User is as stored.
func (s *Store) CreateUser(ctx context.Context, u User) (User, error) {
	if err := validateUser(u); err != nil {
		return User{}, fmt.Errorf("meta: create user: %w", err)
	}
	u.Created = createdOrNow(u.Created)
	val, err := s.encodeUser(u)
	if err != nil {
		return User{}, err
	}
	key, tkey := s.userKey(u.Name), s.tenantKey(u.Tenant)
	resp, err := s.client.Txn(ctx).
		If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(tkey), "!=", 0),
		).
		Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return User{}, fmt.Errorf("meta: create user %q: %w", u.Name, err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().GetCount() > 0 {
			return User{}, fmt.Errorf("meta: create user %q: %w", u.Name, ErrExists)
		}
		return User{}, fmt.Errorf("meta: create user %q: tenant %q: %w", u.Name, u.Tenant, ErrNotFound)
	}
	return s.decodeUser(key, []byte(val)) // a copy that shares nothing with u
}

// GetUser reads one user; ErrNotFound if there is none of that name.
func (s *Store) GetUser(ctx context.Context, name string) (User, error) {
	u, _, err := s.getUser(ctx, name)
	return u, err
}

// getUser reads one user with its key's mod revision.
func (s *Store) getUser(ctx context.Context, name string) (User, int64, error) {
	if err := ValidateUserName(name); err != nil {
		return User{}, 0, fmt.Errorf("meta: get user: %w", err)
	}
	key := s.userKey(name)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return User{}, 0, fmt.Errorf("meta: get user %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return User{}, 0, fmt.Errorf("meta: get user %q: %w", name, ErrNotFound)
	}
	u, err := s.decodeUser(key, resp.Kvs[0].Value)
	return u, resp.Kvs[0].ModRevision, err
}

// ListUsers lists the users of tenant ("" for every tenant), sorted by name.
func (s *Store) ListUsers(ctx context.Context, tenant string) ([]User, error) {
	resp, err := s.client.Get(ctx, s.usersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list users: %w", err)
	}
	var out []User
	for _, kv := range resp.Kvs {
		u, err := s.decodeUser(string(kv.Key), kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list users: %w", err)
		}
		if tenant == "" || u.Tenant == tenant {
			out = append(out, u)
		}
	}
	// Escaped key order is not name order ("%" sorts before letters).
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteUser deletes a user and every API key of it in one transaction;
// ErrNotFound if there is none.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	if err := ValidateUserName(name); err != nil {
		return fmt.Errorf("meta: delete user: %w", err)
	}
	key := s.userKey(name)
	for range maxSecurityAttempts {
		resp, err := s.client.Txn(ctx).Then(
			clientv3.OpGet(key),
			clientv3.OpGet(s.apiKeysPrefix(), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return fmt.Errorf("meta: delete user %q: %w", name, err)
		}
		rev := resp.Header.Revision
		ukvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(ukvs) == 0 {
			return fmt.Errorf("meta: delete user %q: %w", name, ErrNotFound)
		}
		ops := []clientv3.Op{clientv3.OpDelete(key)}
		for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
			k, err := s.decodeAPIKey(string(kv.Key), kv.Value)
			if err != nil {
				// Whose it is cannot be known; no reader accepts it either.
				// Refusing would leave the user impossible to revoke.
				s.log.Error().Err(err).Str("user", name).Msg("delete user: skipping undecodable API key")
				continue
			}
			if k.User == name {
				ops = append(ops, clientv3.OpDelete(string(kv.Key)))
			}
		}
		// No API key changed since the read: one created for this user
		// meanwhile fails the second compare, and after this transaction
		// CreateAPIKey finds no user.
		tx, err := s.client.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(key), "=", ukvs[0].CreateRevision),
				clientv3.Compare(clientv3.ModRevision(s.apiKeysPrefix()), "<", rev+1).WithPrefix(),
			).
			Then(ops...).
			Commit()
		if err != nil {
			return fmt.Errorf("meta: delete user %q: %w", name, err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("meta: delete user %q: changed %d times while deleting: %w", name, maxSecurityAttempts, ErrConflict)
}

// updateUser applies change to the stored user and writes it back if the
// user did not change meanwhile, retrying otherwise.
func (s *Store) updateUser(ctx context.Context, name, what string, change func(*User) error) error {
	for range maxSecurityAttempts {
		u, rev, err := s.getUser(ctx, name)
		if err != nil {
			return fmt.Errorf("meta: %s: %w", what, err)
		}
		if err := change(&u); err != nil {
			return fmt.Errorf("meta: %s of user %q: %w", what, name, err)
		}
		val, err := s.encodeUser(u)
		if err != nil {
			return err
		}
		key := s.userKey(name)
		tx, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, val)).
			Commit()
		if err != nil {
			return fmt.Errorf("meta: %s of user %q: %w", what, name, err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("meta: %s of user %q: changed %d times meanwhile: %w", what, name, maxSecurityAttempts, ErrConflict)
}

// UpsertScram sets the user's credential for mechanism, replacing one it
// had (Kafka's AlterUserScramCredentials upsertion). Unlike Kafka, which
// accepts credentials for a name it has never seen, the user must exist:
// ErrNotFound otherwise, since a user here also has a tenant and a role.
func (s *Store) UpsertScram(ctx context.Context, user, mechanism string, keys ScramKeys) error {
	if err := validateScram(mechanism, keys); err != nil {
		return fmt.Errorf("meta: upsert SCRAM credential of user %q: %w", user, err)
	}
	return s.updateUser(ctx, user, "upsert "+mechanism+" credential", func(u *User) error {
		if u.Scram == nil {
			u.Scram = map[string]ScramKeys{}
		}
		u.Scram[mechanism] = keys
		return nil
	})
}

// DeleteScram removes the user's credential for mechanism (Kafka's
// AlterUserScramCredentials deletion): ErrNotFound if the user does not
// exist or has no credential for it.
func (s *Store) DeleteScram(ctx context.Context, user, mechanism string) error {
	if _, ok := scramKeyLen(mechanism); !ok {
		return fmt.Errorf("meta: delete SCRAM credential of user %q: %w: mechanism %q", user, ErrInvalidName, mechanism)
	}
	return s.updateUser(ctx, user, "delete "+mechanism+" credential", func(u *User) error {
		if _, ok := u.Scram[mechanism]; !ok {
			return fmt.Errorf("no %s credential: %w", mechanism, ErrNotFound)
		}
		delete(u.Scram, mechanism)
		return nil
	})
}

// SetRole changes the user's role; ErrNotFound if there is no such user.
func (s *Store) SetRole(ctx context.Context, user, role string) error {
	if err := validateRole(role); err != nil {
		return fmt.Errorf("meta: set role of user %q: %w", user, err)
	}
	return s.updateUser(ctx, user, "set role", func(u *User) error {
		u.Role = role
		return nil
	})
}
