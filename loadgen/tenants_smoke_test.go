package loadgen_test

// The noisy-neighbour scenario against the shared real sluiced (PLAINTEXT,
// so every tenant is the default one on its own topic): each tenant runs
// alone, then all three together, and every figure the report promises is
// there. How fast is not asserted.

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/loadgen"
)

func TestSmokeNoisyNeighbour(t *testing.T) {
	addr := broker(t)
	base := smokeConfig(loadgen.ScenarioSteady)
	base.Brokers, base.Duration, base.Rate, base.Producers = []string{addr}, time.Second, 500, 1
	base.JSON = true
	quiet, err := loadgen.ParseTenant("name=quiet,rate=300,consumers=1")
	if err != nil {
		t.Fatal(err)
	}
	replay, err := loadgen.ParseTenant("name=replay,prefill=3000")
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := loadgen.NoisyNeighbour([]loadgen.Tenant{quiet, replay})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	m, err := loadgen.NewTenants(base, tenants, true, zerolog.Nop(), &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*runTimeout)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr.String())
	}
	var rep struct {
		Tenants []loadgen.TenantRun `json:"tenants"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Tenants) != 6 {
		t.Fatalf("report (%v): %s", err, stdout.String())
	}
	for _, r := range rep.Tenants {
		res := r.Result
		if res == nil {
			t.Fatalf("%s %s: %s", r.Tenant.Name, r.Phase, r.Error)
		}
		switch r.Tenant.Name {
		case "noisy":
			if res.TargetRate != 0 || res.Produced.Records == 0 || res.AckLatency.Count == 0 {
				t.Errorf("noisy %s: target %v, produced %+v, ack %+v", r.Phase, res.TargetRate, res.Produced, res.AckLatency)
			}
		case "quiet":
			if res.TargetRate != 300 || res.Produced.Records == 0 || res.AckLatency.P99Ms <= 0 || res.FetchLatency.Count == 0 || res.E2ELatency.Count == 0 {
				t.Errorf("quiet %s: produced %+v, ack %+v, fetch %+v", r.Phase, res.Produced, res.AckLatency, res.FetchLatency)
			}
		case "replay":
			if res.Replay == nil || res.Replay.Prefilled != 3000 || res.Consumed.Records != 3000 || res.FetchLatency.Count == 0 {
				t.Errorf("replay %s: %+v, consumed %+v, fetch %+v", r.Phase, res.Replay, res.Consumed, res.FetchLatency)
			}
		}
	}
	if rep.Tenants[0].Phase != "alone" || rep.Tenants[5].Phase != "together" {
		t.Errorf("phases %s .. %s, want alone first", rep.Tenants[0].Phase, rep.Tenants[5].Phase)
	}
}
