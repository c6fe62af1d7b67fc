package kafka

// DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (51),
// v0 (flexible), KIP-554: users' SCRAM credentials in the metadata store.
// Who may call them is authz.ManageUsers (api_acls.go): the tenant-admin or
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

	"github.com/sluice-mq/sluice/broker/kafka/authz"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// userInReach reads the user name if the caller may manage it.
func (b *Server) userInReach(ctx context.Context, caller auth.Identity, name string) (meta.User, error) {
	u, err := b.Store.GetUser(ctx, name)
	switch {
	case errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName):
		return meta.User{}, authz.UnknownUserError(name)
	case err != nil:
		return meta.User{}, fmt.Errorf("read user %q: %w", name, err)
	case !caller.IsSuper() && u.Tenant != caller.Principal.Tenant:
		return meta.User{}, authz.UnknownUserError(name)
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
			resp.ErrorCode, resp.ErrorMessage = authz.AdminError(err)
			return done(resp), nil
		}
		for _, u := range users {
			if len(u.Scram) > 0 {
				resp.Results = append(resp.Results, authz.DescribedUser(u))
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
			err = fmt.Errorf("user %q: %w", ru.Name, authz.ErrDuplicate)
		case err == nil && len(u.Scram) == 0:
			err = fmt.Errorf("%w: user %q has no SCRAM credential", authz.ErrUnknownUser, ru.Name)
		case err == nil:
			res = authz.DescribedUser(u)
		}
		res.ErrorCode, res.ErrorMessage = authz.AdminError(err)
		resp.Results = append(resp.Results, res)
	}
	return done(resp), nil
}

func handleAlterUserSCRAMCredentials(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := newResponse(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	caller := b.callerOf(ctx)
	changes, bad := authz.ScramChanges(r)
	for _, name := range authz.AlteredUsers(r) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		err := bad[name]
		if err == nil {
			err = b.alterScram(ctx, caller, name, changes[name])
		}
		res.ErrorCode, res.ErrorMessage = authz.AdminError(err)
		resp.Results = append(resp.Results, res)
	}
	return done(resp), nil
}

// alterScram applies one user's changes in request order, deletions first
// (Kafka's order). They are separate store updates: an error leaves the
// ones before it applied, and the result says which failed.
func (b *Server) alterScram(ctx context.Context, caller auth.Identity, name string, changes []authz.ScramChange) error {
	u, err := b.userInReach(ctx, caller, name)
	if err != nil {
		return err
	}
	for _, c := range changes {
		if c.Keys == nil {
			if _, ok := u.Scram[c.Mechanism]; !ok {
				return fmt.Errorf("%w: user %q has no %s credential to delete", authz.ErrUnknownUser, name, c.Mechanism)
			}
		}
	}
	for _, c := range changes {
		if c.Keys == nil {
			err = b.Store.DeleteScram(ctx, name, c.Mechanism)
		} else {
			err = b.Store.UpsertScram(ctx, name, c.Mechanism, *c.Keys)
		}
		if err != nil {
			return fmt.Errorf("alter %s credential of user %q: %w", c.Mechanism, name, err)
		}
	}
	b.Logger.Info().Str("principal", caller.Principal.String()).Str("user", name).Str("tenant", u.Tenant).
		Int("changes", len(changes)).Msg("SCRAM credentials altered")
	return nil
}
