package loadgen

// This file owns runs of several tenants at once: each tenant has its own
// credentials, topic, rate and role and is one Runner of its own (its own
// clients, topic and collector), all started together; and the
// noisy-neighbour scenario built from them. With Alone each tenant first
// runs by itself, one after another, so the report can set each tenant's
// figures beside what they became with the others.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
)

// ScenarioNoisyNeighbour runs three tenants: noisy, far above any quota
// (as fast as it can), quiet at a modest rate with a tail reader, and
// replay, reading its topic from offset 0.
const ScenarioNoisyNeighbour = "noisy-neighbour"

// Tenant roles.
const (
	RoleWriter = "writer" // produces at Rate (0: as fast as possible); Consumers read the tail
	RoleReplay = "replay" // prefills its topic, then reads it from offset 0
)

// Tenant is one tenant of a multi-tenant run. Zero fields take the run's
// (Config's) value.
type Tenant struct {
	Name         string  `json:"name"`
	Role         string  `json:"role"`
	User         string  `json:"user,omitempty"` // SASL user; "": the run's --sasl-user
	PasswordFile string  `json:"-"`              // "": the run's --sasl-password-file
	Mechanism    string  `json:"mechanism,omitempty"`
	Rate         float64 `json:"rate"`
	Topic        string  `json:"topic,omitempty"`
	Producers    int     `json:"producers,omitempty"`
	Consumers    int     `json:"consumers"`
	Partitions   int     `json:"partitions,omitempty"`
	Prefill      int     `json:"prefill,omitempty"`
	Tiered       bool    `json:"tiered,omitempty"` // create the topic with remote.storage.enable=true
	rateSet      bool
	consumersSet bool
}

// ParseTenant reads one --tenant spec: comma-separated key=value pairs,
// name required; keys name, role (writer|replay), user, password-file,
// mechanism, rate, topic, producers, consumers, partitions, prefill,
// tiered (true|false).
func ParseTenant(spec string) (Tenant, error) {
	var t Tenant
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return t, fmt.Errorf("%w: tenant %q: %q is not key=value", ErrInvalidConfig, spec, kv)
		}
		var err error
		num := func(p *int) { *p, err = strconv.Atoi(v) }
		switch k {
		case "name":
			t.Name = v
		case "role":
			t.Role = v
		case "user":
			t.User = v
		case "password-file":
			t.PasswordFile = v
		case "mechanism":
			t.Mechanism = v
		case "rate":
			t.Rate, err = strconv.ParseFloat(v, 64)
			t.rateSet = true
		case "topic":
			t.Topic = v
		case "producers":
			num(&t.Producers)
		case "consumers":
			num(&t.Consumers)
			t.consumersSet = true
		case "partitions":
			num(&t.Partitions)
		case "prefill":
			num(&t.Prefill)
		case "tiered":
			t.Tiered, err = strconv.ParseBool(v)
		default:
			return t, fmt.Errorf("%w: tenant %q: unknown key %q", ErrInvalidConfig, spec, k)
		}
		if err != nil {
			return t, fmt.Errorf("%w: tenant %q: %s: %w", ErrInvalidConfig, spec, k, err)
		}
	}
	if t.Name == "" {
		return t, fmt.Errorf("%w: tenant %q: no name", ErrInvalidConfig, spec)
	}
	return t, nil
}

// NoisyNeighbour completes the scenario's three tenants from the given
// ones, which may set any of noisy, quiet and replay by name (their
// credentials, rates, topics): noisy writes as fast as it can, quiet at
// the run's rate with one tail reader, replay prefills its topic and reads
// it from offset 0.
func NoisyNeighbour(given []Tenant) ([]Tenant, error) {
	out := []Tenant{
		{Name: "noisy", Role: RoleWriter, Rate: 0, rateSet: true},
		{Name: "quiet", Role: RoleWriter, Consumers: 1, consumersSet: true},
		{Name: "replay", Role: RoleReplay},
	}
	for _, g := range given {
		i := -1
		for j := range out {
			if out[j].Name == g.Name {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%w: %s takes tenants noisy, quiet and replay, not %q", ErrInvalidConfig, ScenarioNoisyNeighbour, g.Name)
		}
		if g.Role != "" && g.Role != out[i].Role {
			return nil, fmt.Errorf("%w: %s: tenant %s is a %s", ErrInvalidConfig, ScenarioNoisyNeighbour, g.Name, out[i].Role)
		}
		d := out[i]
		g.Role = d.Role
		if !g.rateSet {
			g.Rate, g.rateSet = d.Rate, d.rateSet
		}
		if !g.consumersSet {
			g.Consumers, g.consumersSet = d.Consumers, d.consumersSet
		}
		out[i] = g
	}
	return out, nil
}

// config is base turned into tenant t's run.
func (t Tenant) config(base Config, now time.Time) (Config, error) {
	c := base
	c.Label = t.Name
	c.Progress, c.JSON, c.CSVPath, c.SVGPath = false, false, "", ""
	c.Topic = t.Topic
	if c.Topic == "" {
		c.Topic = fmt.Sprintf("loadgen-%s-%d", t.Name, now.UnixNano())
	}
	if t.User != "" {
		c.Security.SASLUser, c.Security.SASLPasswordFile = t.User, t.PasswordFile
		if c.Security.SASLMechanism == "" {
			c.Security.SASLMechanism = "SCRAM-SHA-512"
		}
	}
	if t.Mechanism != "" {
		c.Security.SASLMechanism = t.Mechanism
	}
	if t.rateSet {
		c.Rate = t.Rate
	}
	if t.Producers > 0 {
		c.Producers = t.Producers
	}
	if t.Partitions > 0 {
		c.Partitions = t.Partitions
	}
	c.Consumers = 0
	if t.consumersSet {
		c.Consumers = t.Consumers
	}
	if t.Tiered {
		c.TopicConfigs = map[string]string{"remote.storage.enable": "true"}
	}
	switch t.Role {
	case RoleWriter, "":
		c.Scenario = ScenarioSteady
	case RoleReplay:
		c.Scenario = ScenarioReplay
		if !t.consumersSet {
			c.Consumers = 1
		}
		c.Prefill = t.Prefill
	default:
		return c, fmt.Errorf("%w: tenant %s: role %q is not writer or replay", ErrInvalidConfig, t.Name, t.Role)
	}
	if c.Consumers > 0 {
		c.ConsumerMode = ConsumerAssign // a tenant may not be allowed groups; reading is what is measured
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("tenant %s: %w", t.Name, err)
	}
	return c, nil
}

// TenantRun is one tenant's result in one phase ("alone" or "together").
type TenantRun struct {
	Tenant Tenant  `json:"tenant"`
	Phase  string  `json:"phase"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Tenants is a multi-tenant run.
type Tenants struct {
	Base    Config
	Tenants []Tenant
	Alone   bool // run each tenant alone first
	log     zerolog.Logger
	stdout  io.Writer
	stderr  io.Writer
	errMu   sync.Mutex // the together phase's tenants report to stderr at once
}

// NewTenants checks every tenant's run and returns the multi-tenant run.
func NewTenants(base Config, tenants []Tenant, alone bool, logger zerolog.Logger, stdout, stderr io.Writer) (*Tenants, error) {
	if len(tenants) == 0 {
		return nil, fmt.Errorf("%w: no tenants", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, t := range tenants {
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: tenant %s given twice", ErrInvalidConfig, t.Name)
		}
		seen[t.Name] = true
		if _, err := t.config(base, time.Now()); err != nil {
			return nil, err
		}
	}
	return &Tenants{Base: base, Tenants: tenants, Alone: alone, log: logger, stdout: stdout, stderr: stderr}, nil
}

// Execute runs the tenants (alone one by one first, if asked, then all
// together) and returns every tenant's result in each phase. A tenant
// whose run fails has its error in its TenantRun; the others go on.
func (m *Tenants) Execute(ctx context.Context) ([]TenantRun, error) {
	var out []TenantRun
	if m.Alone {
		for _, t := range m.Tenants {
			out = append(out, m.one(ctx, t, "alone"))
			if ctx.Err() != nil {
				return out, fmt.Errorf("loadgen: tenants: %w", ctx.Err())
			}
		}
	}
	together := make([]TenantRun, len(m.Tenants))
	var wg sync.WaitGroup
	for i, t := range m.Tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = m.one(ctx, t, "together")
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return out, fmt.Errorf("loadgen: tenants: %w", ctx.Err())
	}
	return append(out, together...), nil
}

func (m *Tenants) one(ctx context.Context, t Tenant, phase string) TenantRun {
	tr := TenantRun{Tenant: t, Phase: phase}
	cfg, err := t.config(m.Base, time.Now())
	if err == nil {
		var r *Runner
		if r, err = New(cfg, m.log.With().Str("tenant", t.Name).Logger()); err == nil {
			tr.Result, err = r.Execute(ctx)
		}
	}
	if err != nil {
		tr.Error = err.Error()
		m.log.Warn().Err(err).Str("tenant", t.Name).Str("phase", phase).Msg("tenant run failed")
	} else {
		m.errMu.Lock()
		fmt.Fprintf(m.stderr, "loadgen: tenant %s (%s) done\n", t.Name, phase)
		m.errMu.Unlock()
	}
	return tr
}

// Run executes and writes the report: JSON with Base.JSON, a table
// otherwise. It fails if any tenant's run did.
func (m *Tenants) Run(ctx context.Context) error {
	runs, err := m.Execute(ctx)
	if err != nil {
		return err
	}
	if m.Base.JSON {
		enc := json.NewEncoder(m.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"tenants": runs}); err != nil {
			return fmt.Errorf("loadgen: write report: %w", err)
		}
	} else if err := WriteTenantTable(m.stdout, runs); err != nil {
		return err
	}
	for _, r := range runs {
		if r.Error != "" {
			return fmt.Errorf("loadgen: tenant %s (%s): %s", r.Tenant.Name, r.Phase, r.Error)
		}
	}
	return nil
}

// WriteTenantTable prints one line per tenant and phase: what it wrote
// (msgs/s, MB/s) or, for a replay, what it read; its ack latency; and its
// readers' fetch and end-to-end latency.
func WriteTenantTable(w io.Writer, runs []TenantRun) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tROLE\tPHASE\tTARGET/S\tMSGS/S\tMB/S\tACK P50\tACK P99\tFETCH P50\tFETCH P99\tE2E P99\tERRORS")
	ms := func(s Summary) string {
		if s.Count == 0 {
			return "-"
		}
		return strconv.FormatFloat(s.P50Ms, 'f', 2, 64)
	}
	ms99 := func(s Summary) string {
		if s.Count == 0 {
			return "-"
		}
		return strconv.FormatFloat(s.P99Ms, 'f', 2, 64)
	}
	for _, r := range runs {
		role := r.Tenant.Role
		if role == "" {
			role = RoleWriter
		}
		target := "-"
		if res := r.Result; res != nil {
			switch {
			case role == RoleReplay:
			case res.TargetRate > 0:
				target = strconv.FormatFloat(res.TargetRate, 'f', 0, 64)
			default:
				target = "max"
			}
			tp := res.Produced
			switch {
			case role == RoleReplay && res.Replay != nil && res.Replay.ReadSeconds > 0:
				tp = Throughput{MsgsPerSec: res.Replay.ReadMsgsPerSec, MBPerSec: res.Replay.ReadMBPerSec}
			case role == RoleReplay:
				tp = res.Consumed // read in one fetch: no read time of its own
			}
			var errs int64
			for _, n := range res.Errors {
				errs += n
			}
			e2e := ms99(res.E2ELatency)
			if role == RoleReplay {
				e2e = "-" // the records are old on purpose
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Tenant.Name, role, r.Phase, target,
				tp.MsgsPerSec, tp.MBPerSec, ms(res.AckLatency), ms99(res.AckLatency), ms(res.FetchLatency), ms99(res.FetchLatency), e2e, errs)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tfailed: %s\n", r.Tenant.Name, role, r.Phase, target, r.Error)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("loadgen: write report: %w", err)
	}
	return nil
}
