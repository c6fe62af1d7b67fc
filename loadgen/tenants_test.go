package loadgen

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestParseTenant(t *testing.T) {
	got, err := ParseTenant("name=acme,user=alice,password-file=/pw,rate=5000,topic=orders,consumers=2,partitions=3,prefill=10,tiered=true,role=replay,mechanism=PLAIN,producers=4")
	want := Tenant{Name: "acme", Role: RoleReplay, User: "alice", PasswordFile: "/pw", Mechanism: "PLAIN", Rate: 5000, Topic: "orders",
		Producers: 4, Consumers: 2, Partitions: 3, Prefill: 10, Tiered: true, rateSet: true, consumersSet: true}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
	}
	for spec, msg := range map[string]string{
		"user=alice":           "no name",
		"name=a,colour=blue":   `unknown key "colour"`,
		"name=a,rate=fast":     "rate",
		"name=a,rate":          "is not key=value",
		"name=a,tiered=maybe":  "tiered",
		"name=a,consumers=1.5": "consumers",
	} {
		if _, err := ParseTenant(spec); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error naming %s", spec, err, msg)
		}
	}
}

func TestNoisyNeighbourTenants(t *testing.T) {
	quiet, _ := ParseTenant("name=quiet,user=carol,password-file=/c,rate=200")
	noisy, _ := ParseTenant("name=noisy,user=bob,password-file=/b")
	ts, err := NoisyNeighbour([]Tenant{quiet, noisy})
	if err != nil || len(ts) != 3 {
		t.Fatalf("%+v %v", ts, err)
	}
	base := DefaultConfig()
	base.Rate, base.Security.SASLMechanism = 1000, "SCRAM-SHA-256"
	now := time.Unix(1, 0)
	cfgs := map[string]Config{}
	for _, tn := range ts {
		c, err := tn.config(base, now)
		if err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		cfgs[tn.Name] = c
	}
	n, q, r := cfgs["noisy"], cfgs["quiet"], cfgs["replay"]
	switch {
	case n.Rate != 0 || n.Consumers != 0 || n.Security.SASLUser != "bob" || n.Security.SASLMechanism != "SCRAM-SHA-256" || n.Label != "noisy":
		t.Errorf("noisy %+v", n)
	case q.Rate != 200 || q.Consumers != 1 || q.Security.SASLUser != "carol" || q.ConsumerMode != ConsumerAssign:
		t.Errorf("quiet %+v", q)
	case r.Scenario != ScenarioReplay || r.Consumers != 1 || r.Rate != 1000 || r.Security.SASLUser != "" || r.Topic != "loadgen-replay-1000000000":
		t.Errorf("replay %+v", r)
	case n.Topic == q.Topic || n.Progress:
		t.Errorf("tenants share topic %s, or progress lines would interleave", n.Topic)
	}
	if _, err := NoisyNeighbour([]Tenant{{Name: "other"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("an unknown tenant: %v", err)
	}
	if _, err := NoisyNeighbour([]Tenant{{Name: "replay", Role: RoleWriter}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("replay as a writer: %v", err)
	}
	tiered, _ := ParseTenant("name=t,role=replay,tiered=true,user=u,password-file=/u")
	if c, err := tiered.config(DefaultConfig(), now); err != nil || c.TopicConfigs["remote.storage.enable"] != "true" || c.Security.SASLMechanism != "SCRAM-SHA-512" {
		t.Errorf("tiered replay with a user: %+v %v", c, err)
	}
	if _, err := NewTenants(DefaultConfig(), []Tenant{{Name: "a"}, {Name: "a"}}, false, zerolog.Nop(), nil, nil); err == nil {
		t.Error("a tenant given twice was taken")
	}
	if _, err := NewTenants(DefaultConfig(), []Tenant{{Name: "a", Role: "reader"}}, false, zerolog.Nop(), nil, nil); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("an unknown role: %v", err)
	}
}

func TestWriteTenantTable(t *testing.T) {
	runs := []TenantRun{
		{Tenant: Tenant{Name: "noisy", Role: RoleWriter}, Phase: "together", Result: &Result{
			Produced: Throughput{MsgsPerSec: 90000, MBPerSec: 92.16}, AckLatency: Summary{Count: 10, P50Ms: 1.5, P99Ms: 12}}},
		{Tenant: Tenant{Name: "replay", Role: RoleReplay}, Phase: "together", Result: &Result{
			Replay: &ReplayResult{ReadSeconds: 1, ReadMsgsPerSec: 50000}, FetchLatency: Summary{Count: 3, P50Ms: 2, P99Ms: 9}, E2ELatency: Summary{Count: 3, P99Ms: 1e6}}},
		{Tenant: Tenant{Name: "quiet"}, Phase: "alone", Error: "SASL refused"},
		{Tenant: Tenant{Name: "small", Role: RoleReplay}, Phase: "alone", Result: &Result{ // read in one fetch
			Replay: &ReplayResult{}, Consumed: Throughput{MsgsPerSec: 40196}}},
	}
	var b bytes.Buffer
	if err := WriteTenantTable(&b, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"TENANT", "FETCH P99"},
		{"noisy", "max", "90000", "92.16", "1.50", "12.00"},
		{"replay", "50000", "2.00", "9.00"},
		{"quiet", "failed: SASL refused"},
		{"small", "40196"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(lines[2], "1000000") {
		t.Errorf("a replay's end-to-end latency is shown: %q", lines[2])
	}
}
