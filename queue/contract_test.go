package queue

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestValidateConfig(t *testing.T) {
	tests := []struct {
		key, value string
		wantErr    string // "" accepts
	}{
		{CfgDeliveryOrder, "relaxed", ""},
		{CfgDeliveryOrder, "per-key-strict", ""},
		{CfgDeliveryOrder, "per-partition-strict", ""},
		{CfgDeliveryOrder, "strict", "is not one of"},
		{CfgBackoffMs, "10000,60000,600000", ""},
		{CfgBackoffMs, "200", ""},
		{CfgBackoffMs, "", "must list 1 to 16"},
		{CfgBackoffMs, "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "must list 1 to 16"},
		{CfgBackoffMs, "100,0", "tier 1"},
		{CfgBackoffMs, "100,abc", "tier 1"},
		{CfgBackoffMs, "604800001", "tier 0"},
		{CfgJitter, "0", ""},
		{CfgJitter, "1", ""},
		{CfgJitter, "0.25", ""},
		{CfgJitter, "1.5", "fraction"},
		{CfgJitter, "-0.1", "fraction"},
		{CfgJitter, "NaN", "fraction"},
		{CfgMaxAttempts, "1", ""},
		{CfgMaxAttempts, "100", ""},
		{CfgMaxAttempts, "0", "[1, 100]"},
		{CfgMaxAttempts, "101", "[1, 100]"},
		{CfgDeadLetterTopic, "", ""},
		{CfgDeadLetterTopic, "orders.dead", ""},
		{CfgDeadLetterTopic, "a~b", "has '~'"},
		{CfgDeadLetterTopic, "..", "not a topic name"},
		{CfgPermanent, "permanent", ""},
		{CfgPermanent, "fatal,bad-input", ""},
		{CfgPermanent, "", ""},
		{CfgPermanent, "Fatal", "use a-z"},
		{CfgPermanent, "transient", "cannot be permanent"},
		{"retry.other", "1", "unknown"},
	}
	for _, tt := range tests {
		err := ValidateConfig(tt.key, tt.value)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s=%q: %v", tt.key, tt.value, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s=%q: error %v, want one containing %q", tt.key, tt.value, err, tt.wantErr)
		}
	}
	for k, v := range Defaults {
		if err := ValidateConfig(k, v); err != nil {
			t.Errorf("default %s=%q refused: %v", k, v, err)
		}
		if Docs[k] == "" {
			t.Errorf("%s has no doc", k)
		}
	}
}

func TestParseContractDefaults(t *testing.T) {
	c, err := ParseContract(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Order != OrderRelaxed || len(c.Backoff) != 3 || c.Backoff[2] != 10*time.Minute || c.MaxAttempts != 4 ||
		c.Jitter != 0.1 || !c.Permanent[ClassPermanent] || c.DeadLetterTopic("orders") != "orders.dlq" {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = ParseContract(map[string]string{CfgPermanent: "fatal", CfgDeadLetterTopic: "dead"})
	if err != nil || !c.Permanent["fatal"] || !c.Permanent[ClassPermanent] || c.DeadLetterTopic("orders") != "dead" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseContract(map[string]string{CfgJitter: "2"}); err == nil {
		t.Fatal("jitter 2 accepted")
	}
}

func TestDecide(t *testing.T) {
	c, err := ParseContract(map[string]string{CfgBackoffMs: "200,400", CfgJitter: "0.1", CfgMaxAttempts: "4", CfgPermanent: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_000_000)
	half := func() float64 { return 0.5 }
	tests := []struct {
		attempt int
		class   string
		want    Decision
	}{
		{1, ClassTransient, Decision{Outcome: Retry, Tier: 0, Due: now.Add(200 * time.Millisecond)}},
		{2, ClassTransient, Decision{Outcome: Retry, Tier: 1, Due: now.Add(400 * time.Millisecond)}},
		{3, "other", Decision{Outcome: Retry, Tier: 1, Due: now.Add(400 * time.Millisecond)}}, // the last tier repeats
		{4, ClassTransient, Decision{Outcome: DeadLetter, Reason: "exhausted"}},
		{9, ClassTransient, Decision{Outcome: DeadLetter, Reason: "exhausted"}},
		{1, ClassPermanent, Decision{Outcome: DeadLetter, Reason: "permanent"}},
		{1, "fatal", Decision{Outcome: DeadLetter, Reason: "permanent"}},
	}
	for _, tt := range tests {
		got := c.Decide(tt.attempt, tt.class, now, half)
		if got != tt.want {
			t.Errorf("Decide(%d, %s) = %+v, want %+v", tt.attempt, tt.class, got, tt.want)
		}
	}
}

// TestDecideJitterBounds: for any random draw the due time is within
// d·(1±jitter), and both ends are reached.
func TestDecideJitterBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	c, _ := ParseContract(map[string]string{CfgBackoffMs: "10000,60000", CfgJitter: "0.2", CfgMaxAttempts: "10"})
	now := time.Unix(0, 0)
	var lo, hi time.Duration = time.Hour, 0
	for i := 0; i < 10000; i++ {
		attempt := 1 + rng.Intn(9)
		d := c.Decide(attempt, ClassTransient, now, rng.Float64)
		base := c.Backoff[min(attempt-1, 1)]
		delay := d.Due.Sub(now)
		if d.Outcome != Retry || float64(delay) < float64(base)*0.8-1 || float64(delay) > float64(base)*1.2+1 {
			t.Fatalf("attempt %d: %+v, delay %v outside %v±20%%", attempt, d, delay, base)
		}
		if attempt == 1 {
			lo, hi = min(lo, delay), max(hi, delay)
		}
	}
	if lo > 8100*time.Millisecond || hi < 11900*time.Millisecond {
		t.Fatalf("jitter spans only [%v, %v] of [8s, 12s]", lo, hi)
	}
	// A broken random source cannot push the due time outside the bounds.
	for _, u := range []float64{-1, 1, 7} {
		if d := c.Decide(1, ClassTransient, now, func() float64 { return u }); d.Due.Sub(now) != 10*time.Second {
			t.Fatalf("u=%v: %v", u, d.Due.Sub(now))
		}
	}
}

func TestRetryTopicNames(t *testing.T) {
	if got := RetryTopic("billing", "orders", 1, 249); got != "__retry.billing.orders.1" {
		t.Fatalf("literal: %s", got)
	}
	// Groups with '.' or characters topics cannot hold are hashed; so is
	// a name over the budget.
	a := RetryTopic("a.b", "c", 0, 249)
	b := RetryTopic("a", "b.c", 0, 249)
	if a == b || !strings.HasPrefix(a, RetryHashedPrefix) || b != "__retry.a.b.c.0" {
		t.Fatalf("a.b/c → %s, a/b.c → %s", a, b)
	}
	if got := RetryTopic("my group/1", "orders", 2, 249); !strings.HasPrefix(got, RetryHashedPrefix) || !strings.HasSuffix(got, ".2") {
		t.Fatalf("hashed: %s", got)
	}
	long := strings.Repeat("x", 240)
	if got := RetryTopic("g", long, 0, 200); len(got) > 200 || !IsRetryTopic(got) {
		t.Fatalf("long: %s", got)
	}
	seen := map[string][3]string{}
	for _, g := range []string{"a", "a.b", "a-b", "a_b", "x y", "", "a.b.c"} {
		for _, tp := range []string{"b", "b.c", "c", "a.b"} {
			for tier := 0; tier < 3; tier++ {
				n := RetryTopic(g, tp, tier, 249)
				if validTopicPart(n, false) != nil {
					t.Fatalf("%q invalid", n)
				}
				k := [3]string{g, tp, string(rune('0' + tier))}
				if prev, dup := seen[n]; dup && prev != k {
					t.Fatalf("%s names both %v and %v", n, prev, k)
				}
				seen[n] = k
			}
		}
	}
}
