package security

// This file owns the bootstrap of the first operator: the reserved tenants
// and the super user AdminUser, from --admin-password-file.
//
// Invariant: the bootstrap creates; it never changes or deletes a record
// that exists (an existing "admin" keeps its password, tenant and role).
// Invariant: the password is read, turned into SCRAM keys and dropped; it
// is never stored or logged.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// ReadPasswordFile reads a password from a file: its content without the
// line ending at its end. An empty password is an error.
func ReadPasswordFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("security: password file: %w", err)
	}
	pw := strings.TrimRight(string(raw), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("security: password file %s is empty", path)
	}
	return pw, nil
}

// bootstrap ensures the reserved tenants exist and creates AdminUser in
// SystemTenant with the file's password unless a user of that name exists.
func bootstrap(ctx context.Context, store *meta.Store, passwordFile string, log zerolog.Logger) error {
	pw, err := ReadPasswordFile(passwordFile)
	if err != nil {
		return err
	}
	for _, t := range []string{meta.SystemTenant, meta.DefaultTenant} {
		if _, err := store.EnsureTenant(ctx, t); err != nil {
			return fmt.Errorf("security: bootstrap: %w", err)
		}
	}
	if u, err := store.GetUser(ctx, AdminUser); err == nil {
		log.Info().Str("tenant", u.Tenant).Str("role", u.Role).
			Msg("security: bootstrap: user admin exists; --admin-password-file left it unchanged")
		return nil
	} else if !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("security: bootstrap: %w", err)
	}
	scram := make(map[string]meta.ScramKeys, 2)
	for _, mech := range []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512} {
		c, err := auth.NewScramCredential(mech, pw, auth.DefaultIterations)
		if err != nil {
			return fmt.Errorf("security: bootstrap: admin password: %w", err)
		}
		scram[mech] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	}
	_, err = store.CreateUser(ctx, meta.User{Name: AdminUser, Tenant: meta.SystemTenant, Role: meta.RoleSuper, Scram: scram})
	switch {
	case err == nil:
		log.Info().Msg("security: bootstrap: created the super user admin in tenant system")
	case errors.Is(err, meta.ErrExists):
		// Another broker of the cluster created it first.
	default:
		return fmt.Errorf("security: bootstrap: %w", err)
	}
	return nil
}
