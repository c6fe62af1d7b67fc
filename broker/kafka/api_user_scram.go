package kafka

// DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (51),
// v0 (flexible), KIP-554: users' SCRAM credentials in the metadata store.
// Who may call them is authzManageUsers (api_acls.go): the tenant-admin or
// super role.
//
// Describe answers mechanisms and iterations, never a salt or a key.
// Alter carries what a client derived from the password (salt, salted
// password, iterations); the broker turns it into the stored keys
// (auth.ScramCredentialFromSaltedPassword) and keeps no salted password.
//
// Unlike Kafka, which makes a user out of any name it is given a credential
// for, a user here must exist already, since it has a tenant and a role:
// users are created with `sluicectl user create` (POST /v1/users).
//
// Invariant: a tenant admin sees and alters only users of its own tenant;
// a user of another tenant is answered exactly as one that does not exist
// (RESOURCE_NOT_FOUND, the same message), so the answer never tells that a
// name is taken elsewhere. A super user reaches every user.
// Invariant: a user with any invalid alteration in the request is not
// altered at all (Kafka's rule); its result names the first problem.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// Kafka's wire codes of the SCRAM mechanisms (ScramMechanism).
const (
	wireScramSHA256 int8 = 1
	wireScramSHA512 int8 = 2
)

// mechanismOf names a wire mechanism code.
func mechanismOf(code int8) (string, error) {
	switch code {
	case wireScramSHA256:
		return auth.MechanismScramSHA256, nil
	case wireScramSHA512:
		return auth.MechanismScramSHA512, nil
	}
	return "", fmt.Errorf("%w: %d (1 is SCRAM-SHA-256, 2 SCRAM-SHA-512)", errUnknownMechanism, code)
}

// wireMechanism is the wire code of a stored mechanism, 0 for none.
func wireMechanism(m string) int8 {
	switch m {
	case meta.ScramSHA256:
		return wireScramSHA256
	case meta.ScramSHA512:
		return wireScramSHA512
	}
	return 0
}

// unknownUserError is the one answer for a user that does not exist or is
// out of the caller's reach.
func unknownUserError(name string) error {
	return fmt.Errorf("%w: %q (users are created with `sluicectl user create` or POST /v1/users)", errUnknownUser, name)
}

// userInReach reads the user name if the caller may manage it.
func (b *Server) userInReach(ctx context.Context, caller auth.Identity, name string) (meta.User, error) {
	u, err := b.Store.GetUser(ctx, name)
	switch {
	case errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName):
		return meta.User{}, unknownUserError(name)
	case err != nil:
		return meta.User{}, fmt.Errorf("read user %q: %w", name, err)
	case !caller.IsSuper() && u.Tenant != caller.Principal.Tenant:
		return meta.User{}, unknownUserError(name)
	}
	return u, nil
}

func handleDescribeUserSCRAMCredentials(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := newResponse(req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	caller := b.callerOf(ctx)
	if len(r.Users) == 0 { // null or empty: every user in reach, those with credentials
		tenant := caller.Principal.Tenant
		if caller.IsSuper() {
			tenant = ""
		}
		users, err := b.Store.ListUsers(ctx, tenant)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = adminError(err)
			return done(resp), nil
		}
		for _, u := range users {
			if len(u.Scram) > 0 {
				resp.Results = append(resp.Results, describedUser(u))
			}
		}
		return done(resp), nil
	}
	count := map[string]int{}
	for _, u := range r.Users {
		count[u.Name]++
	}
	answered := map[string]bool{}
	for _, ru := range r.Users {
		if answered[ru.Name] {
			continue // Kafka answers a duplicated name once
		}
		answered[ru.Name] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = ru.Name
		u, err := b.userInReach(ctx, caller, ru.Name)
		switch {
		case count[ru.Name] > 1:
			err = fmt.Errorf("user %q: %w", ru.Name, errDuplicate)
		case err == nil && len(u.Scram) == 0:
			err = fmt.Errorf("%w: user %q has no SCRAM credential", errUnknownUser, ru.Name)
		case err == nil:
			res = describedUser(u)
		}
		res.ErrorCode, res.ErrorMessage = adminError(err)
		resp.Results = append(resp.Results, res)
	}
	return done(resp), nil
}

// describedUser is the answer for a user: its mechanisms and iterations.
func describedUser(u meta.User) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	res.User = u.Name
	for m, k := range u.Scram {
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = wireMechanism(m), int32(k.Iterations)
		res.CredentialInfos = append(res.CredentialInfos, ci)
	}
	slices.SortFunc(res.CredentialInfos, func(x, y kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) int {
		return int(x.Mechanism) - int(y.Mechanism)
	})
	return res
}

// alteredUsers lists the users an AlterUserScramCredentials request names,
// in first-seen order: the response has one result per user.
func alteredUsers(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var users []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return users
}

// scramChange is one validated alteration of one user's credential.
type scramChange struct {
	mechanism string
	keys      *meta.ScramKeys // nil: delete
}

// scramChanges validates every alteration of r and groups them by user; a
// user with an invalid one maps to its error instead.
func scramChanges(r *kmsg.AlterUserSCRAMCredentialsRequest) (map[string][]scramChange, map[string]error) {
	changes := map[string][]scramChange{}
	bad := map[string]error{}
	seen := map[[2]string]bool{}
	note := func(user string, mechanism int8, keys func(string) (*meta.ScramKeys, error)) {
		if bad[user] != nil {
			return
		}
		m, err := mechanismOf(mechanism)
		if err == nil && user == "" {
			err = fmt.Errorf("%w: empty user name", auth.ErrInvalidCredential)
		}
		if err == nil && seen[[2]string{user, m}] {
			err = fmt.Errorf("user %q: %s altered twice in one request: %w", user, m, errDuplicate)
		}
		var k *meta.ScramKeys
		if err == nil {
			seen[[2]string{user, m}] = true
			k, err = keys(m)
		}
		if err != nil {
			bad[user] = err
			return
		}
		changes[user] = append(changes[user], scramChange{mechanism: m, keys: k})
	}
	for _, d := range r.Deletions {
		note(d.Name, d.Mechanism, func(string) (*meta.ScramKeys, error) { return nil, nil })
	}
	for _, u := range r.Upsertions {
		note(u.Name, u.Mechanism, func(m string) (*meta.ScramKeys, error) {
			c, err := auth.ScramCredentialFromSaltedPassword(m, u.Salt, u.SaltedPassword, int(u.Iterations))
			if err != nil {
				return nil, fmt.Errorf("user %q: %w", u.Name, err)
			}
			return &meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, nil
		})
	}
	for u := range bad {
		delete(changes, u)
	}
	return changes, bad
}

func handleAlterUserSCRAMCredentials(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := newResponse(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	caller := b.callerOf(ctx)
	changes, bad := scramChanges(r)
	for _, name := range alteredUsers(r) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		err := bad[name]
		if err == nil {
			err = b.alterScram(ctx, caller, name, changes[name])
		}
		res.ErrorCode, res.ErrorMessage = adminError(err)
		resp.Results = append(resp.Results, res)
	}
	return done(resp), nil
}

// alterScram applies one user's changes in request order, deletions first
// (Kafka's order). They are separate store updates: an error leaves the
// ones before it applied, and the result says which failed.
func (b *Server) alterScram(ctx context.Context, caller auth.Identity, name string, changes []scramChange) error {
	u, err := b.userInReach(ctx, caller, name)
	if err != nil {
		return err
	}
	for _, c := range changes {
		if c.keys == nil {
			if _, ok := u.Scram[c.mechanism]; !ok {
				return fmt.Errorf("%w: user %q has no %s credential to delete", errUnknownUser, name, c.mechanism)
			}
		}
	}
	for _, c := range changes {
		if c.keys == nil {
			err = b.Store.DeleteScram(ctx, name, c.mechanism)
		} else {
			err = b.Store.UpsertScram(ctx, name, c.mechanism, *c.keys)
		}
		if err != nil {
			return fmt.Errorf("alter %s credential of user %q: %w", c.mechanism, name, err)
		}
	}
	b.Logger.Info().Str("principal", caller.Principal.String()).Str("user", name).Str("tenant", u.Tenant).
		Int("changes", len(changes)).Msg("SCRAM credentials altered")
	return nil
}
