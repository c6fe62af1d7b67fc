package main

// commands.go owns the subcommands: their flags, the API call each makes,
// and what each prints. The wire types are the API's JSON, declared here
// rather than imported from the server's package so that this binary does
// not link the metadata store (and etcd) it never uses.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// writeJSON prints v as one indented JSON document.
func (e *env) writeJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns an aligned-column writer on stdout; Flush it.
func (e *env) table() *tabwriter.Writer {
	return tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
}

type tenant struct {
	Name      string `json:"name"`
	Pool      string `json:"pool"`
	CreatedMs int64  `json:"created_ms"`
}

type user struct {
	Name       string   `json:"name"`
	Tenant     string   `json:"tenant"`
	Role       string   `json:"role"`
	Mechanisms []string `json:"mechanisms"`
	CreatedMs  int64    `json:"created_ms"`
}

type apiKey struct {
	ID          string `json:"id"`
	User        string `json:"user"`
	CreatedMs   int64  `json:"created_ms"`
	Description string `json:"description,omitempty"`
	Key         string `json:"key,omitempty"` // only when created
}

type binding struct {
	Tenant       string `json:"tenant,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"`
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`
}

// msTime prints a creation time for a person.
func msTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05Z")
}

// esc escapes a name for a path segment.
func esc(name string) string { return url.PathEscape(name) }

// done prints the result of a call that answers nothing (204): a line, or
// a JSON object saying what was done.
func (e *env) done(what, name string) error {
	if e.json {
		return e.writeJSON(map[string]any{what: name, "ok": true})
	}
	fmt.Fprintf(e.stdout, "%s %s\n", what, name)
	return nil
}

// --- tenant ---

func tenantCreateFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	pool := fs.String("pool", "", "broker pool the tenant's partitions are placed in (default: none, the shared pool)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME"); err != nil {
			return err
		}
		req := map[string]string{"name": args[0]}
		if *pool != "" {
			req["pool"] = *pool
		}
		var t tenant
		if err := e.call(ctx, "POST", "/v1/tenants", nil, req, &t); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(t)
		}
		fmt.Fprintf(e.stdout, "created tenant %s in pool %s\n", t.Name, t.Pool)
		return nil
	}
}

// tenantSetPoolFlags binds a tenant to a broker pool: its partitions
// created from then on are placed there; existing ones do not move.
func tenantSetPoolFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME", "POOL"); err != nil {
			return err
		}
		var t tenant
		if err := e.call(ctx, "PUT", "/v1/tenants/"+esc(args[0])+"/pool", nil, map[string]string{"pool": args[1]}, &t); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(t)
		}
		fmt.Fprintf(e.stdout, "tenant %s is in pool %s (new partitions only; existing ones stay where they are)\n", t.Name, t.Pool)
		return nil
	}
}

func tenantLsFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		var out struct {
			Tenants []tenant `json:"tenants"`
		}
		if err := e.call(ctx, "GET", "/v1/tenants", nil, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		tw := e.table()
		fmt.Fprintln(tw, "NAME\tPOOL\tCREATED")
		for _, t := range out.Tenants {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Pool, msTime(t.CreatedMs))
		}
		return tw.Flush()
	}
}

func tenantRmFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME"); err != nil {
			return err
		}
		if err := e.call(ctx, "DELETE", "/v1/tenants/"+esc(args[0]), nil, nil, nil); err != nil {
			return err
		}
		return e.done("deleted tenant", args[0])
	}
}

// --- user ---

// readPasswordStdin reads the password from the first line of stdin.
func (e *env) readPasswordStdin() (string, error) {
	raw, err := io.ReadAll(io.LimitReader(e.stdin, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	pw, _, _ := strings.Cut(string(raw), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", usagef("no password on stdin (its first line is the password)")
	}
	return pw, nil
}

func userCreateFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	tenantName := fs.String("tenant", "", "the user's tenant (default: the caller's own)")
	role := fs.String("role", "user", "user, tenant-admin or super")
	mechanisms := fs.String("mechanisms", "", "comma-separated SCRAM mechanisms (default SCRAM-SHA-256,SCRAM-SHA-512)")
	stdin := fs.Bool("password-stdin", false, "read the password from stdin (required: never on the command line)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME"); err != nil {
			return err
		}
		if !*stdin {
			return usagef("--password-stdin is required (a password is never taken on the command line)")
		}
		pw, err := e.readPasswordStdin()
		if err != nil {
			return err
		}
		req := map[string]any{"name": args[0], "password": pw, "role": *role}
		if *tenantName != "" {
			req["tenant"] = *tenantName
		}
		if *mechanisms != "" {
			req["mechanisms"] = strings.Split(*mechanisms, ",")
		}
		var u user
		if err := e.call(ctx, "POST", "/v1/users", nil, req, &u); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(u)
		}
		fmt.Fprintf(e.stdout, "created user %s in tenant %s (role %s; %s)\n", u.Name, u.Tenant, u.Role, strings.Join(u.Mechanisms, ", "))
		return nil
	}
}

func userLsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	tenantName := fs.String("tenant", "", "list this tenant's users (default: the caller's own; every tenant for a super user)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		q := url.Values{}
		if *tenantName != "" {
			q.Set("tenant", *tenantName)
		}
		var out struct {
			Users []user `json:"users"`
		}
		if err := e.call(ctx, "GET", "/v1/users", q, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		tw := e.table()
		fmt.Fprintln(tw, "NAME\tTENANT\tROLE\tMECHANISMS\tCREATED")
		for _, u := range out.Users {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Name, u.Tenant, u.Role, strings.Join(u.Mechanisms, ","), msTime(u.CreatedMs))
		}
		return tw.Flush()
	}
}

func userRmFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME"); err != nil {
			return err
		}
		if err := e.call(ctx, "DELETE", "/v1/users/"+esc(args[0]), nil, nil, nil); err != nil {
			return err
		}
		return e.done("deleted user", args[0])
	}
}

func userPasswdFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	stdin := fs.Bool("password-stdin", false, "read the new password from stdin (required)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "NAME"); err != nil {
			return err
		}
		if !*stdin {
			return usagef("--password-stdin is required (a password is never taken on the command line)")
		}
		pw, err := e.readPasswordStdin()
		if err != nil {
			return err
		}
		if err := e.call(ctx, "PUT", "/v1/users/"+esc(args[0])+"/password", nil, map[string]string{"password": pw}, nil); err != nil {
			return err
		}
		return e.done("set the password of user", args[0])
	}
}

// --- apikey ---

func apikeyCreateFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	name := fs.String("user", "", "the user the key authenticates as (default: the authenticating --user)")
	desc := fs.String("description", "", "what the key is for")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if *name == "" {
			*name = e.authUser
		}
		if *name == "" {
			return usagef("--user is required (whose keys)")
		}
		var k apiKey
		if err := e.call(ctx, "POST", "/v1/users/"+esc(*name)+"/api-keys", nil, map[string]string{"description": *desc}, &k); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(k)
		}
		tw := e.table()
		fmt.Fprintf(tw, "ID\t%s\nUSER\t%s\nKEY\t%s\n", k.ID, k.User, k.Key)
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, "sluicectl: store the key now; it is not shown again (use it with --api-key or SLUICE_API_KEY)")
		return nil
	}
}

func apikeyLsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	name := fs.String("user", "", "whose keys (default: the authenticating --user)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if *name == "" {
			*name = e.authUser
		}
		if *name == "" {
			return usagef("--user is required (whose keys)")
		}
		var out struct {
			APIKeys []apiKey `json:"api_keys"`
		}
		if err := e.call(ctx, "GET", "/v1/users/"+esc(*name)+"/api-keys", nil, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		tw := e.table()
		fmt.Fprintln(tw, "ID\tUSER\tCREATED\tDESCRIPTION")
		for _, k := range out.APIKeys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.User, msTime(k.CreatedMs), k.Description)
		}
		return tw.Flush()
	}
}

func apikeyRmFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "ID"); err != nil {
			return err
		}
		if err := e.call(ctx, "DELETE", "/v1/api-keys/"+esc(args[0]), nil, nil, nil); err != nil {
			return err
		}
		return e.done("deleted API key", args[0])
	}
}

// --- acl ---

// aclFlags registers the fields of a binding or filter.
func aclFlags(fs *flag.FlagSet, filter bool) (*binding, *string) {
	b := &binding{}
	anyNote := ""
	if filter {
		anyNote = " (default: any)"
	}
	fs.StringVar(&b.ResourceType, "resource-type", "", "topic, group, cluster or transactional-id"+anyNote)
	fs.StringVar(&b.ResourceName, "resource-name", "", "the resource's name, a prefix, or *"+anyNote)
	fs.StringVar(&b.PatternType, "pattern-type", "", map[bool]string{false: "literal (default) or prefixed", true: "any (default), literal, prefixed or match"}[filter])
	fs.StringVar(&b.Principal, "principal", "", "User:<name> or User:*"+anyNote)
	fs.StringVar(&b.Host, "host", "", map[bool]string{false: "client IP address, or * (default)", true: "client IP address or *" + anyNote}[filter])
	fs.StringVar(&b.Operation, "operation", "", "read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write or all"+anyNote)
	fs.StringVar(&b.Permission, "permission", "", "allow or deny"+anyNote)
	tenantName := fs.String("tenant", "", "tenant of the bindings (super users; default: the caller's own, and every tenant for a super user's ls and rm)")
	return b, tenantName
}

func (e *env) printBindings(bs []binding) error {
	tw := e.table()
	fmt.Fprintln(tw, "TENANT\tPERMISSION\tPRINCIPAL\tHOST\tOPERATION\tRESOURCE\tPATTERN\tNAME")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Tenant, b.Permission, b.Principal, b.Host,
			b.Operation, b.ResourceType, b.PatternType, b.ResourceName)
	}
	return tw.Flush()
}

func aclAddFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	b, tenantName := aclFlags(fs, false)
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		var missing []string
		for _, f := range []struct{ name, v string }{{"--resource-type", b.ResourceType}, {"--principal", b.Principal},
			{"--operation", b.Operation}, {"--permission", b.Permission}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return usagef("%s required", strings.Join(missing, ", "))
		}
		var out struct {
			Bindings []binding `json:"bindings"`
		}
		req := map[string]any{"bindings": []binding{*b}}
		if *tenantName != "" {
			req["tenant"] = *tenantName
		}
		if err := e.call(ctx, "POST", "/v1/acls", nil, req, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		return e.printBindings(out.Bindings)
	}
}

func aclLsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	b, tenantName := aclFlags(fs, true)
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		q := url.Values{}
		for k, v := range map[string]string{"tenant": *tenantName, "resource_type": b.ResourceType,
			"resource_name": b.ResourceName, "pattern_type": b.PatternType, "principal": b.Principal,
			"host": b.Host, "operation": b.Operation, "permission": b.Permission} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var out struct {
			Bindings []binding `json:"bindings"`
		}
		if err := e.call(ctx, "GET", "/v1/acls", q, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		return e.printBindings(out.Bindings)
	}
}

func aclRmFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	b, tenantName := aclFlags(fs, true)
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if *b == (binding{}) {
			return usagef("needs at least one filter flag; --resource-type any selects every binding")
		}
		req := map[string]any{"filter": b}
		if *tenantName != "" {
			req["tenant"] = *tenantName
		}
		var out struct {
			Deleted []binding `json:"deleted"`
		}
		if err := e.call(ctx, "POST", "/v1/acls:delete", nil, req, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		if len(out.Deleted) == 0 {
			fmt.Fprintln(e.stdout, "no binding matched")
			return nil
		}
		if err := e.printBindings(out.Deleted); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted %d binding%s\n", len(out.Deleted), map[bool]string{true: "", false: "s"}[len(out.Deleted) == 1])
		return nil
	}
}
