package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/httpapi/secapi/secapitest"
	"github.com/sluice-mq/sluice/cmd/internal/cli/clitest"
)

// result is one run of sluicectl.
type result struct {
	code           int
	stdout, stderr string
}

// harness runs sluicectl in process against one API server.
type harness struct {
	t      *testing.T
	srv    *secapitest.Server
	adminF string // --password-file of the super user
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := secapitest.Start(t, zerolog.Nop())
	return &harness{t: t, srv: srv, adminF: writeFile(t, "admin.pw", secapitest.AdminPassword+"\n")}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ctl runs sluicectl with stdin and environment env; SLUICE_SERVER is the
// test server unless env sets it.
func (h *harness) ctl(stdin string, env map[string]string, args ...string) result {
	h.t.Helper()
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "SLUICE_SERVER" {
			return h.srv.URL
		}
		return ""
	}
	var out, errb bytes.Buffer
	err := run(secapitest.Context(h.t), args, streams{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: getenv})
	code := exitCode(err, &errb)
	return result{code, out.String(), errb.String()}
}

// admin runs sluicectl as the super user.
func (h *harness) admin(stdin string, args ...string) result {
	h.t.Helper()
	return h.ctl(stdin, nil, append([]string{"--user", secapitest.AdminUser, "--password-file", h.adminF}, args...)...)
}

func (r result) want(t *testing.T, code int, stdout ...string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("stdout does not hold %q:\n%s", s, r.stdout)
		}
	}
	return r
}

func (r result) wantErr(t *testing.T, code int, stderr ...string) {
	t.Helper()
	r.want(t, code)
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Fatalf("stderr does not hold %q:\n%s", s, r.stderr)
		}
	}
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, r.stdout)
	}
	return v
}

func TestEndToEnd(t *testing.T) {
	h := newHarness(t)

	// Tenants.
	h.admin("", "tenant", "create", "acme").want(t, 0, "created tenant acme")
	ts := decode[struct{ Tenants []tenant }](t, h.admin("", "tenant", "ls", "--json").want(t, 0))
	if len(ts.Tenants) != 3 || ts.Tenants[0].Name != "acme" || ts.Tenants[0].CreatedMs == 0 {
		t.Fatalf("tenant ls --json: %+v", ts)
	}
	h.admin("", "tenant", "ls").want(t, 0, "NAME", "CREATED", "acme", "system")

	// Users: the password from stdin, flags after the name too.
	h.admin("acme-pw\n", "user", "create", "--tenant", "acme", "boss", "--password-stdin", "--role", "tenant-admin").
		want(t, 0, "created user boss in tenant acme (role tenant-admin; SCRAM-SHA-256, SCRAM-SHA-512)")
	bossF := writeFile(t, "boss.pw", "acme-pw")
	boss := func(stdin string, args ...string) result {
		return h.ctl(stdin, nil, append([]string{"--user", "boss", "--password-file", bossF}, args...)...)
	}
	u := decode[user](t, boss("alice-pw", "user", "create", "alice", "--password-stdin", "--json").want(t, 0))
	if u.Name != "alice" || u.Tenant != "acme" || u.Role != "user" {
		t.Fatalf("user create --json: %+v", u)
	}
	boss("", "user", "ls").want(t, 0, "NAME", "alice", "boss", "tenant-admin")
	boss("alice-pw2\n", "user", "passwd", "alice", "--password-stdin").want(t, 0, "set the password of user alice")
	aliceF := writeFile(t, "alice.pw", "alice-pw2\n")
	// The authenticating --user (before the command) is apikey's default user.
	h.ctl("", nil, "--user", "alice", "--password-file", aliceF, "apikey", "ls").want(t, 0, "ID")

	// API keys: shown once, in the answer that creates them.
	r := boss("", "apikey", "create", "--user", "alice", "--description", "ci job").want(t, 0, "KEY")
	if !strings.Contains(r.stderr, "not shown again") {
		t.Fatalf("no warning that the key is shown once: %s", r.stderr)
	}
	key := regexp.MustCompile(`sk_[a-z2-7]{16}_[a-z2-7]{32}`).FindString(r.stdout)
	if key == "" {
		t.Fatalf("no key in %q", r.stdout)
	}
	id := strings.Split(key, "_")[1]
	ls := boss("", "apikey", "ls", "--user", "alice").want(t, 0, id, "ci job")
	if strings.Contains(ls.stdout, key) {
		t.Fatal("apikey ls shows the key")
	}
	keys := decode[struct {
		APIKeys []apiKey `json:"api_keys"`
	}](t, h.ctl("", map[string]string{"SLUICE_API_KEY": key}, "apikey", "ls", "--user", "alice", "--json").want(t, 0))
	if len(keys.APIKeys) != 1 || keys.APIKeys[0].ID != id || keys.APIKeys[0].Key != "" {
		t.Fatalf("apikey ls --json with the key: %+v", keys)
	}

	// ACLs, as the tenant admin.
	boss("", "acl", "add", "--resource-type", "topic", "--resource-name", "orders", "--pattern-type", "prefixed",
		"--principal", "User:alice", "--operation", "read", "--permission", "allow").
		want(t, 0, "PERMISSION", "ALLOW", "User:alice", "READ", "TOPIC", "PREFIXED", "orders")
	boss("", "acl", "add", "--resource-type", "group", "--resource-name", "app", "--principal", "User:*",
		"--host", "10.0.0.1", "--operation", "describe", "--permission", "deny").want(t, 0, "10.0.0.1")
	acls := decode[struct{ Bindings []binding }](t, boss("", "acl", "ls", "--json", "--resource-type", "topic").want(t, 0))
	if len(acls.Bindings) != 1 || acls.Bindings[0].ResourceName != "orders" || acls.Bindings[0].Tenant != "acme" {
		t.Fatalf("acl ls --json: %+v", acls)
	}
	h.admin("", "acl", "ls").want(t, 0, "acme", "orders", "app")
	boss("", "acl", "rm", "--principal", "User:bob").want(t, 0, "no binding matched")
	boss("", "acl", "rm", "--resource-name", "orders").want(t, 0, "deleted 1 binding\n")
	left := decode[struct{ Bindings []binding }](t, boss("", "--json", "acl", "ls").want(t, 0))
	if len(left.Bindings) != 1 || left.Bindings[0].ResourceName != "app" {
		t.Fatalf("left: %+v", left)
	}

	// Server refusals: exit 1 with the server's message.
	h.admin("", "tenant", "create", "acme").wantErr(t, 1, `create tenant "acme": already exists`, "tenant_exists", "HTTP 409")
	boss("", "tenant", "ls").wantErr(t, 1, "only a super user", "HTTP 403")
	boss("p\n", "user", "create", "--tenant", "system", "mallory", "--password-stdin").wantErr(t, 1, `not "system"`)
	boss("", "acl", "add", "--resource-type", "topic", "--resource-name", "x", "--principal", "User:a",
		"--operation", "reed", "--permission", "allow").wantErr(t, 1, `"reed" is not an operation`, "HTTP 400")
	h.ctl("", map[string]string{"SLUICE_API_KEY": key + "x"}, "tenant", "ls").wantErr(t, 1, "HTTP 401")
	h.ctl("", nil, "tenant", "ls").wantErr(t, 1, "needs credentials", "HTTP 401")
	h.admin("", "user", "rm", "nobody").wantErr(t, 1, "HTTP 404")

	// Cleaning up, which revokes.
	h.ctl("", map[string]string{"SLUICE_API_KEY": key}, "apikey", "rm", id).want(t, 0, "deleted API key "+id)
	h.ctl("", map[string]string{"SLUICE_API_KEY": key}, "apikey", "ls", "--user", "alice").wantErr(t, 1, "HTTP 401")
	h.admin("", "user", "rm", "alice").want(t, 0)
	h.admin("", "tenant", "rm", "acme").wantErr(t, 1, "tenant_not_empty", "boss")
	h.admin("", "--json", "user", "rm", "boss").want(t, 0, `"ok": true`)
	h.admin("", "tenant", "rm", "acme").want(t, 0, "deleted tenant acme")
}

func TestUsageAndExitCodes(t *testing.T) {
	h := newHarness(t)
	pw := h.adminF
	for _, tc := range []struct {
		name   string
		stdin  string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"no command", "", nil, nil, 2, "no command"},
		{"unknown command", "", nil, []string{"topic", "ls"}, 2, `unknown command "topic"`},
		{"unknown subcommand", "", nil, []string{"tenant", "list"}, 2, `unknown subcommand "list" of tenant (create, ls, rm, set-pool)`},
		{"missing subcommand", "", nil, []string{"acl"}, 2, "acl needs a subcommand (add, ls, rm)"},
		{"unknown flag", "", nil, []string{"tenant", "ls", "--all"}, 2, "tenant ls: flag provided but not defined: -all"},
		{"missing name", "", nil, []string{"tenant", "create"}, 2, "tenant create: missing NAME"},
		{"extra argument", "", nil, []string{"tenant", "rm", "a", "b"}, 2, `tenant rm: unexpected argument "b"`},
		{"password on stdin only", "", nil, []string{"--user", "admin", "--password-file", pw, "user", "create", "x"}, 2, "--password-stdin is required"},
		{"empty stdin", "", nil, []string{"--user", "admin", "--password-file", pw, "user", "create", "x", "--password-stdin"}, 2, "no password on stdin"},
		{"user and key", "", map[string]string{"SLUICE_API_KEY": "k"}, []string{"--user", "admin", "--password-file", pw, "tenant", "ls"}, 2, "--user and --api-key both given"},
		{"user without file", "", nil, []string{"--user", "admin", "tenant", "ls"}, 2, "--user needs --password-file"},
		{"bad server", "", nil, []string{"--server", "localhost:8080", "tenant", "ls"}, 2, `--server "localhost:8080" is not`},
		{"acl add incomplete", "", nil, []string{"acl", "add", "--resource-type", "topic"}, 2, "acl add: --principal, --operation, --permission required"},
		{"acl rm without filter", "", nil, []string{"acl", "rm"}, 2, "acl rm: needs at least one filter flag"},
		{"apikey without user", "", nil, []string{"apikey", "create"}, 2, "apikey create: --user is required"},
		{"missing password file", "", nil, []string{"--user", "admin", "--password-file", "/nonexistent/pw", "tenant", "ls"}, 1, "--password-file"},
		{"unreachable server", "", map[string]string{"SLUICE_SERVER": "http://127.0.0.1:1"}, []string{"tenant", "ls"}, 1, "connection refused"},
		{"bad cacert", "", nil, []string{"--cacert", pw, "tenant", "ls"}, 1, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.ctl(tc.stdin, tc.env, tc.args...)
			r.wantErr(t, tc.code, tc.stderr)
			if tc.code == 2 && !strings.Contains(r.stderr, "run 'sluicectl --help' for usage") {
				t.Fatalf("a usage mistake without the hint: %s", r.stderr)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); tc.code == 2 && n != 1 {
				t.Fatalf("a usage mistake in %d lines, want the mistake and the hint:\n%s", n+1, r.stderr)
			}
		})
	}
	h.ctl("", nil, "--version").want(t, 0, "sluicectl")
	r := h.ctl("", nil, "--help")
	r.want(t, 0)
	if !strings.Contains(r.stdout, "apikey create") || !strings.Contains(r.stdout, "--server") && !strings.Contains(r.stdout, "-server") {
		t.Fatalf("--help: %s", r.stdout)
	}
	h.ctl("", nil, "acl", "add", "--help").want(t, 0, "usage: sluicectl acl add", "-resource-type")
}

// TestHelpConventions: help of every kind on stdout with exit 0, mistakes
// on stderr with exit 2 (cmd/internal/cli), all before any server is asked.
func TestHelpConventions(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		getenv := func(k string) string {
			if k == "SLUICE_SERVER" {
				return "http://127.0.0.1:1" // nothing listens: a command that ran would fail with 1
			}
			return ""
		}
		return exitCode(run(t.Context(), args, streams{stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, getenv: getenv}), stderr)
	}
	clitest.Check(t, run, append(commandTreeHelp(), []clitest.Help{
		{Args: []string{"--help"}, Want: "usage: sluicectl [global flags] command"},
		{Args: []string{"-h"}, Want: "usage: sluicectl [global flags] command"},
		{Args: []string{"help"}, Want: "usage: sluicectl [global flags] command"},
		{Args: []string{"tenant", "--help"}, Want: "tenant create"},
		{Args: []string{"tenant", "help"}, Want: "tenant create"},
		{Args: []string{"help", "tenant"}, Want: "tenant create"},
		{Args: []string{"tenant", "create", "--help"}, Want: "usage: sluicectl tenant create"},
		{Args: []string{"tenant", "create", "-h"}, Want: "usage: sluicectl tenant create"},
		{Args: []string{"help", "tenant", "create"}, Want: "usage: sluicectl tenant create"},
		{Args: []string{"top", "--help"}, Want: "usage: sluicectl top"},
		{Args: []string{"help", "top"}, Want: "usage: sluicectl top"},
		{Args: []string{"help", "certs", "create"}, Want: "usage: sluicectl certs create"},
	}...), append(unknownCommandMistakes(), []clitest.Mistake{
		{Args: []string{"--no-such-flag"}, Want: "flag provided but not defined: -no-such-flag"},
		{Args: []string{"bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"help", "bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"help", "tenant", "bogus"}, Want: `unknown subcommand "bogus"`},
		{Args: []string{"tenant", "create", "--bogus"}, Want: "tenant create: flag provided but not defined: -bogus"},
	}...))
}

// commandTreeHelp walks the command table: every command and subcommand
// answers each form of help with its own usage, each command lists its
// subcommands, and the top-level usage lists every subcommand.
func commandTreeHelp() []clitest.Help {
	var helps []clitest.Help
	seen := map[string]bool{}
	for _, c := range commands {
		if c.verb == "" { // a command without subcommands (top)
			helps = append(helps, clitest.HelpForms([]string{c.group}, "usage: sluicectl "+c.group+" ")...)
			helps = append(helps, clitest.Help{Args: []string{c.group, "help"}, Want: "usage: sluicectl " + c.group + " "})
		} else {
			path := []string{c.group, c.verb}
			helps = append(helps, clitest.HelpForms(path, "usage: sluicectl "+c.group+" "+c.verb+" ")...)
			if !seen[c.group] {
				seen[c.group] = true
				groupUsage := "usage: sluicectl [global flags] " + c.group + " subcommand"
				helps = append(helps, clitest.HelpForms([]string{c.group}, groupUsage)...)
				helps = append(helps, clitest.Help{Args: []string{c.group, "help"}, Want: groupUsage})
			}
			helps = append(helps, clitest.Help{Args: []string{c.group, "--help"}, Want: c.summary})
		}
		helps = append(helps, clitest.Help{Args: []string{"--help"}, Want: c.summary})
	}
	return helps
}

// unknownCommandMistakes: a mistake in a command's name lists every
// command of the table (the list was once written by hand and fell behind).
func unknownCommandMistakes() []clitest.Mistake {
	var ms []clitest.Mistake
	seen := map[string]bool{}
	for _, c := range commands {
		if !seen[c.group] {
			seen[c.group] = true
			ms = append(ms, clitest.Mistake{Args: []string{"bogus"}, Want: c.group},
				clitest.Mistake{Args: nil, Want: c.group})
		}
	}
	return ms
}

// TestCACert speaks to the same API over TLS: --cacert verifies the server,
// and without it the unknown CA is refused (exit 1).
func TestCACert(t *testing.T) {
	h := newHarness(t)
	tlsSrv := httptest.NewUnstartedServer(h.srv.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	ca := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})))
	env := map[string]string{"SLUICE_SERVER": tlsSrv.URL}
	h.ctl("", env, "--user", secapitest.AdminUser, "--password-file", h.adminF, "--cacert", ca, "tenant", "ls").
		want(t, 0, "system")
	h.ctl("", env, "--user", secapitest.AdminUser, "--password-file", h.adminF, "tenant", "ls").
		wantErr(t, 1, "certificate")
}
