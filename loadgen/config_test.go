package loadgen

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"jetstream", func(c *Config) { c.System = SystemJetStream }, false},
		{"unknown system", func(c *Config) { c.System = "pulsar" }, true},
		{"http produce only", func(c *Config) { c.System, c.Brokers, c.Consumers = SystemHTTP, nil, 0 }, false},
		{"http consumers over kafka", func(c *Config) { c.System = SystemHTTP }, false},
		{"http consumers without brokers", func(c *Config) { c.System, c.Brokers = SystemHTTP, nil }, true},
		{"http no url", func(c *Config) { c.System, c.Consumers, c.HTTPURL = SystemHTTP, 0, "127.0.0.1:8080" }, true},
		{"http acks leader", func(c *Config) { c.System, c.Consumers, c.Acks, c.Idempotent = SystemHTTP, 0, "leader", false }, true},
		{"http batch 0", func(c *Config) { c.System, c.Consumers, c.HTTPBatch = SystemHTTP, 0, 0 }, true},
		{"replication factor 3", func(c *Config) { c.ReplicationFactor = 3 }, false},
		{"replication factor 0", func(c *Config) { c.ReplicationFactor = 0 }, true},
		{"no brokers", func(c *Config) { c.Brokers = nil }, true},
		{"unknown scenario", func(c *Config) { c.Scenario = "soak" }, true},
		{"zero producers", func(c *Config) { c.Producers = 0 }, true},
		{"negative rate", func(c *Config) { c.Rate = -1 }, true},
		{"max rate", func(c *Config) { c.Rate = 0 }, false},
		{"bad sizes", func(c *Config) { c.Sizes = "uniform:9-1" }, true},
		{"bad keys", func(c *Config) { c.Keys = "zipf:10:0.5" }, true},
		{"acks leader idempotent", func(c *Config) { c.Acks = "leader" }, true},
		{"acks leader", func(c *Config) { c.Acks = "leader"; c.Idempotent = false }, false},
		{"acks bogus", func(c *Config) { c.Acks = "some" }, true},
		{"peak at max rate", func(c *Config) { c.Scenario = ScenarioPeak; c.Rate = 0 }, true},
		{"peak without consumers", func(c *Config) { c.Scenario = ScenarioPeak; c.Consumers = 0 }, true},
		{"replay without consumers", func(c *Config) { c.Scenario = ScenarioReplay; c.Consumers = 0 }, true},
		{"crash with one consumer", func(c *Config) { c.Scenario = ScenarioConsumerCrash }, true},
		{"crash assign", func(c *Config) {
			c.Scenario, c.Consumers, c.ConsumerMode = ScenarioConsumerCrash, 3, ConsumerAssign
		}, true},
		{"crash", func(c *Config) { c.Scenario, c.Consumers = ScenarioConsumerCrash, 3 }, false},
		{"bad consumer mode", func(c *Config) { c.ConsumerMode = "shared" }, true},
		{"zero duration", func(c *Config) { c.Duration = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mod(&c)
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v is not ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigResolvedScenarioDefaults(t *testing.T) {
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			c.Scenario = name
			r := c.resolved(epoch)
			if r.Sizes == "" || r.Keys == "" || r.Topic == "" || r.Group == "" || r.Prefill == 0 {
				t.Fatalf("unresolved: %+v", r)
			}
			if _, err := ParseSizes(r.Sizes); err != nil {
				t.Fatal(err)
			}
			if _, err := ParseKeys(r.Keys); err != nil {
				t.Fatal(err)
			}
			if ScenarioHelp(name) == "" {
				t.Fatal("no help text")
			}
		})
	}
	c := DefaultConfig()
	c.Sizes, c.Keys, c.Duration = "fixed:10", "none", 9*time.Second
	r := c.resolved(epoch)
	if r.Sizes != "fixed:10" || r.Keys != "none" || r.PeakDuration != 3*time.Second || r.CrashAfter != 3*time.Second {
		t.Fatalf("explicit values overridden: %+v", r)
	}
}

func TestDrainThreshold(t *testing.T) {
	tests := []struct {
		base []int64
		rate float64
		want int64
	}{
		{nil, 1000, 60},
		{[]int64{5, 1, 9}, 1000, 2*5 + 50 + 10},
		{[]int64{100, 100, 100, 4000}, 0, 2*100 + 10},
	}
	for _, tt := range tests {
		if got := drainThreshold(tt.base, tt.rate); got != tt.want {
			t.Errorf("drainThreshold(%v, %v) = %d, want %d", tt.base, tt.rate, got, tt.want)
		}
	}
}
