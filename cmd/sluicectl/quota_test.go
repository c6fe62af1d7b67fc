package main

import (
	"testing"
)

// TestQuotaCommands: quota set, ls and keys against the real API, as the
// super user and as a tenant admin, with the exit codes of each mistake.
func TestQuotaCommands(t *testing.T) {
	h := newHarness(t)
	h.admin("", "tenant", "create", "acme").want(t, 0)
	h.admin("", "tenant", "create", "globex").want(t, 0)

	h.admin("", "quota", "set", "--tenant", "acme", "producer_byte_rate=1e7", "topics=10").
		want(t, 0, "TENANT", "acme", "producer_byte_rate", "10000000", "bytes/s", "topics")
	h.admin("", "quota", "set", "--tenant", "acme", "--remove", "topics", "groups=5", "--weight", "2", "--priority-class", "low").
		want(t, 0, "groups", "low")
	one := decode[struct{ Tenants []tenantQuotas }](t, h.admin("", "quota", "ls", "--tenant", "acme", "--json").want(t, 0))
	if len(one.Tenants) != 1 || one.Tenants[0].Weight != 2 || one.Tenants[0].PriorityClass != "low" ||
		len(one.Tenants[0].Limits) != 2 || one.Tenants[0].Limits["groups"] != 5 || one.Tenants[0].Limits["producer_byte_rate"] != 1e7 {
		t.Fatalf("quota ls --tenant acme --json: %+v", one)
	}
	h.admin("", "quota", "set", "--tenant", "globex", "connections=100").want(t, 0)
	all := decode[struct{ Tenants []tenantQuotas }](t, h.admin("", "quota", "ls", "--json").want(t, 0))
	if len(all.Tenants) != 2 || all.Tenants[0].Tenant != "acme" || all.Tenants[1].Limits["connections"] != 100 {
		t.Fatalf("quota ls --json: %+v", all)
	}
	h.admin("", "quota", "ls").want(t, 0, "TENANT", "WEIGHT", "CLASS", "acme", "globex", "connections", "100")

	// Mistakes on the command line: exit 2, no call made.
	h.admin("", "quota", "set", "producer_byte_rate=1").wantErr(t, 2, "--tenant is required")
	h.admin("", "quota", "set", "--tenant", "acme", "producer_bytes_rate=1").wantErr(t, 2, "unknown quota key", "producer_byte_rate")
	h.admin("", "quota", "set", "--tenant", "acme", "topics=ten").wantErr(t, 2, "not a number")
	h.admin("", "quota", "set", "--tenant", "acme", "topics").wantErr(t, 2, "not key=value")
	h.admin("", "quota", "set", "--tenant", "acme", "--remove", "bogus").wantErr(t, 2, "unknown quota key")
	h.admin("", "quota", "set", "--tenant", "acme").wantErr(t, 2, "nothing to do")
	h.admin("", "quota", "frob").wantErr(t, 2, "unknown subcommand", "set, ls, keys")
	// Refused by the server: exit 1 with its message.
	h.admin("", "quota", "set", "--tenant", "ghost", "topics=1").wantErr(t, 1, "tenant_not_found")
	h.admin("", "quota", "set", "--tenant", "acme", "--priority-class", "gold").wantErr(t, 1, "invalid_quota", "gold")

	// A tenant admin reads its own tenant's quotas and changes none.
	h.admin("boss-pw\n", "user", "create", "--tenant", "acme", "boss", "--password-stdin", "--role", "tenant-admin").want(t, 0)
	bossF := writeFile(t, "boss.pw", "boss-pw")
	boss := func(args ...string) result {
		return h.ctl("", nil, append([]string{"--user", "boss", "--password-file", bossF}, args...)...)
	}
	boss("quota", "ls", "--tenant", "acme").want(t, 0, "groups")
	boss("quota", "ls", "--tenant", "globex").wantErr(t, 1, "forbidden")
	boss("quota", "set", "--tenant", "acme", "groups=500").wantErr(t, 1, "forbidden", "only a super user")

	// The keys, with no server at all.
	noServer := map[string]string{"SLUICE_SERVER": "http://127.0.0.1:1"}
	h.ctl("", noServer, "quota", "keys").want(t, 0, "KEY", "KIND", "producer_byte_rate", "rate", "bytes/s", "storage_bytes", "storage")
	keys := decode[struct {
		Keys []quotaKey `json:"keys"`
	}](t, h.ctl("", noServer, "quota", "keys", "--json").want(t, 0))
	if len(keys.Keys) != 15 || keys.Keys[0].Name != "connection_creation_rate" || keys.Keys[0].Help == "" {
		t.Fatalf("quota keys --json: %+v", keys)
	}
	h.ctl("", nil, "quota", "set", "--help").want(t, 0)
}
