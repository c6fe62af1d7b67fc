package cluster

// tenants.go owns the cluster's side of Config.Tenants: the super user's
// password, the SASL listeners' addresses, and calls of the HTTP admin API
// (tenants, users, quotas) as the super user.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
)

// AdminPassword is the password of the super user admin of a cluster with
// Config.Tenants (a test cluster's: not a secret).
const AdminPassword = "chaos-admin-secret"

func (c *Cluster) adminPasswordFile() string { return filepath.Join(c.cfg.Dir, "admin-password") }

// SASLBootstrap lists the brokers' SASL_PLAINTEXT listeners (Config.Tenants).
func (c *Cluster) SASLBootstrap() []string {
	var out []string
	for _, b := range c.brokers {
		if b.SASLAddr != "" {
			out = append(out, b.SASLAddr)
		}
	}
	return out
}

// authorize adds the super user's credentials to req when the cluster has
// security on.
func (c *Cluster) authorize(req *http.Request) {
	if c.cfg.Tenants {
		req.SetBasicAuth("admin", AdminPassword)
	}
}

// Admin sends an HTTP admin API call (body JSON, or "") as the super user
// to the first broker that answers, and succeeds on a 2xx answer or on one
// of the statuses in ok (409 for "already exists", say).
func (c *Cluster) Admin(ctx context.Context, method, path, body string, ok ...int) error {
	var errs []error
	for _, b := range c.brokers {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+b.HTTPAddr+path, strings.NewReader(body))
		if err != nil {
			return fmt.Errorf("chaos/cluster: %s %s: %w", method, path, err)
		}
		req.Header.Set("Content-Type", "application/json")
		c.authorize(req)
		resp, err := c.http.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", b.ID, err))
			continue
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		_ = resp.Body.Close()
		if resp.StatusCode/100 == 2 || slices.Contains(ok, resp.StatusCode) {
			return nil
		}
		return fmt.Errorf("chaos/cluster: %s %s: %s %s", method, path, resp.Status, bytes.TrimSpace(msg))
	}
	return fmt.Errorf("chaos/cluster: %s %s: no broker answered: %w", method, path, errors.Join(errs...))
}
