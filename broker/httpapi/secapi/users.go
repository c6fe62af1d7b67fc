package secapi

// This file owns the user routes: create a user with SCRAM credentials made
// from a password, list, delete, and set a new password.
//
// Invariant: a password lives only in the request being handled: it is
// turned into SCRAM credentials (auth.NewScramCredential) before anything
// is written, and never logged or answered.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// maxPasswordLen bounds a password: SCRAM has no limit, but a password of
// megabytes is a mistake (or an attack on SASLprep's time).
const maxPasswordLen = 1024

// Role names as the API reads and writes them. The store's ordinary role
// is the empty string; the API names it "user" so an answer never holds an
// empty role.
const (
	apiRoleUser        = "user"
	apiRoleTenantAdmin = auth.RoleTenantAdmin
	apiRoleSuper       = auth.RoleSuper
)

// defaultMechanisms are the SCRAM mechanisms of a user created without any.
var defaultMechanisms = []string{meta.ScramSHA256, meta.ScramSHA512}

// User is a user as the API shows it: never its keys.
type User struct {
	Name       string   `json:"name"`
	Tenant     string   `json:"tenant"`
	Role       string   `json:"role"`       // "user", "tenant-admin" or "super"
	Mechanisms []string `json:"mechanisms"` // the SCRAM mechanisms it has credentials for
	CreatedMs  int64    `json:"created_ms"`
}

// UserList is the answer of GET /v1/users.
type UserList struct {
	Users []User `json:"users"`
}

// CreateUserRequest is the body of POST /v1/users.
type CreateUserRequest struct {
	Name       string   `json:"name"`
	Tenant     string   `json:"tenant,omitempty"` // default: the caller's
	Password   string   `json:"password"`
	Role       string   `json:"role,omitempty"`       // default "user"
	Mechanisms []string `json:"mechanisms,omitempty"` // default both SCRAM mechanisms
}

// SetPasswordRequest is the body of PUT /v1/users/{name}/password.
type SetPasswordRequest struct {
	Password string `json:"password"`
}

func userOut(u meta.User) User {
	role := u.Role
	if role == meta.RoleUser {
		role = apiRoleUser
	}
	mechs := slices.Sorted(maps.Keys(u.Scram))
	if mechs == nil {
		mechs = []string{} // [] in JSON, not null
	}
	return User{Name: u.Name, Tenant: u.Tenant, Role: role, Mechanisms: mechs, CreatedMs: u.Created.UnixMilli()}
}

// parseRole reads an API role into the store's.
func parseRole(role string) (string, error) {
	switch role {
	case "", apiRoleUser:
		return meta.RoleUser, nil
	case apiRoleTenantAdmin:
		return meta.RoleTenantAdmin, nil
	case apiRoleSuper:
		return meta.RoleSuper, nil
	}
	return "", badRequest("field role: %q is not a role (%q, %q or %q)", role, apiRoleUser, apiRoleTenantAdmin, apiRoleSuper)
}

// parseMechanisms reads the mechanisms a credential is made for: Kafka's
// names, case ignored, each once.
func parseMechanisms(in []string) ([]string, error) {
	if in == nil {
		return defaultMechanisms, nil
	}
	if len(in) == 0 {
		return nil, badRequest("field mechanisms: empty; leave it out for both %s and %s, or name at least one", meta.ScramSHA256, meta.ScramSHA512)
	}
	var out []string
	for i, m := range in {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m != meta.ScramSHA256 && m != meta.ScramSHA512 {
			return nil, badRequest("field mechanisms[%d]: %q is not a SCRAM mechanism (%s or %s)", i, in[i], meta.ScramSHA256, meta.ScramSHA512)
		}
		if slices.Contains(out, m) {
			return nil, badRequest("field mechanisms[%d]: %s named twice", i, m)
		}
		out = append(out, m)
	}
	return out, nil
}

// credentials derives the SCRAM credential of password for each mechanism.
func (a *api) credentials(password string, mechanisms []string) (map[string]meta.ScramKeys, error) {
	switch {
	case password == "":
		return nil, badRequest("field password is required and must not be empty")
	case len(password) > maxPasswordLen:
		return nil, badRequest("field password: %d bytes, at most %d", len(password), maxPasswordLen)
	}
	out := make(map[string]meta.ScramKeys, len(mechanisms))
	for _, m := range mechanisms {
		c, err := auth.NewScramCredential(m, password, a.iterations)
		if err != nil {
			// The only cause a client controls is SASLprep refusing the
			// password; the error names no part of it.
			return nil, badRequest("field password: %s", strings.TrimPrefix(err.Error(), "auth: "))
		}
		out[m] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	}
	return out, nil
}

// validUser is meta's name rule, answered as a 400.
func validUser(name string) error {
	if err := meta.ValidateUserName(name); err != nil {
		return badRequest("%s", strings.TrimPrefix(err.Error(), "meta: invalid name: "))
	}
	return nil
}

func (a *api) createUser(w http.ResponseWriter, r *http.Request) {
	u, c, err := a.decodeCreateUser(w, r)
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	stored, err := a.store.CreateUser(r.Context(), u)
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	a.log.Info().Str("user", stored.Name).Str("tenant", stored.Tenant).Str("role", stored.Role).
		Str("by", c.Principal.String()).Msg("user created")
	writeJSON(w, http.StatusCreated, userOut(stored))
}

// decodeCreateUser reads and checks POST /v1/users, and decides whether
// the caller may make that user; the credentials are derived last, after
// every cheaper refusal.
func (a *api) decodeCreateUser(w http.ResponseWriter, r *http.Request) (meta.User, caller, error) {
	const what = "create user"
	c, err := callerOf(r)
	if err != nil {
		return meta.User{}, c, err
	}
	var req CreateUserRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return meta.User{}, c, err
	}
	if req.Name == "" {
		return meta.User{}, c, badRequest("%s: field name is required", what)
	}
	if err := validUser(req.Name); err != nil {
		return meta.User{}, c, err
	}
	if req.Tenant == "" {
		req.Tenant = c.tenant()
	}
	if err := validTenant(req.Tenant); err != nil {
		return meta.User{}, c, err
	}
	role, err := parseRole(req.Role)
	if err != nil {
		return meta.User{}, c, err
	}
	mechs, err := parseMechanisms(req.Mechanisms)
	if err != nil {
		return meta.User{}, c, err
	}
	if err := c.mustManage(req.Tenant, what); err != nil {
		return meta.User{}, c, err
	}
	if role == meta.RoleSuper && !c.IsSuper() {
		return meta.User{}, c, forbidden("%s: only a super user may create a super user", what)
	}
	scram, err := a.credentials(req.Password, mechs)
	if err != nil {
		return meta.User{}, c, err
	}
	return meta.User{Name: req.Name, Tenant: req.Tenant, Role: role, Scram: scram}, c, nil
}

func (a *api) listUsers(w http.ResponseWriter, r *http.Request) {
	c, err := callerOf(r)
	tenant := r.URL.Query().Get("tenant")
	if err == nil && tenant != "" {
		err = validTenant(tenant)
	}
	if err == nil && tenant == "" && !c.IsSuper() {
		tenant = c.tenant() // a super user without one lists every tenant's
	}
	if err == nil && tenant != "" {
		err = c.mustManage(tenant, "list users")
	}
	if err == nil && tenant == "" {
		err = c.mustBeSuper("list users of every tenant")
	}
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	us, err := a.store.ListUsers(r.Context(), tenant)
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	out := UserList{Users: make([]User, 0, len(us))}
	for _, u := range us {
		out.Users = append(out.Users, userOut(u))
	}
	writeJSON(w, http.StatusOK, out)
}

// targetUser reads the user the path names, for a caller allowed by may.
func (a *api) targetUser(r *http.Request, what string, may func(caller, meta.User, string) error) (meta.User, caller, error) {
	c, err := callerOf(r)
	if err != nil {
		return meta.User{}, c, err
	}
	name := r.PathValue("name")
	if err := validUser(name); err != nil {
		return meta.User{}, c, err
	}
	u, err := a.store.GetUser(r.Context(), name)
	if err != nil {
		return meta.User{}, c, err
	}
	if err := may(c, u, what); err != nil {
		return meta.User{}, c, err
	}
	return u, c, nil
}

func (a *api) deleteUser(w http.ResponseWriter, r *http.Request) {
	u, c, err := a.targetUser(r, "delete user", caller.mayManageUser)
	if err == nil {
		err = a.store.DeleteUser(r.Context(), u.Name)
	}
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	a.log.Info().Str("user", u.Name).Str("tenant", u.Tenant).Str("by", c.Principal.String()).Msg("user deleted")
	w.WriteHeader(http.StatusNoContent)
}

// setPassword replaces the credentials of every SCRAM mechanism the user
// has (both if it has none), so that the old password stops working for
// all of them. The mechanisms are written one after the other: for a
// moment one may take the new password and the other the old.
func (a *api) setPassword(w http.ResponseWriter, r *http.Request) {
	u, c, err := a.targetUser(r, "set password", caller.mayActFor)
	var req SetPasswordRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	mechs := defaultMechanisms
	if len(u.Scram) > 0 {
		mechs = slices.Sorted(maps.Keys(u.Scram))
	}
	var creds map[string]meta.ScramKeys
	if err == nil {
		creds, err = a.credentials(req.Password, mechs)
	}
	for _, m := range mechs {
		if err != nil {
			break
		}
		if uerr := a.store.UpsertScram(r.Context(), u.Name, m, creds[m]); uerr != nil {
			err = fmt.Errorf("%s credential: %w", m, uerr)
		}
	}
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	a.log.Info().Str("user", u.Name).Str("tenant", u.Tenant).Str("by", c.Principal.String()).Msg("password set")
	w.WriteHeader(http.StatusNoContent)
}
