package queue

// This file owns the delivery contract of a topic: its config keys, their
// validation (ValidateConfig, which the broker's topic configs call) and
// the parsed Contract, and the decision a nack leads to (Decide).
//
// Invariant: Decide never retries a permanent class, never retries past
// MaxAttempts, and never returns a due time before now + d·(1−jitter).

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Config keys of the contract.
const (
	CfgDeliveryOrder   = "delivery.order"
	CfgBackoffMs       = "retry.backoff.ms"
	CfgJitter          = "retry.jitter"
	CfgMaxAttempts     = "retry.max.attempts"
	CfgDeadLetterTopic = "dead.letter.topic"
	CfgPermanent       = "retry.permanent.classes"
	CfgVisibilityMs    = "visibility.timeout.ms"
)

// Delivery orders.
const (
	OrderRelaxed            = "relaxed"
	OrderPerKeyStrict       = "per-key-strict"
	OrderPerPartitionStrict = "per-partition-strict"
)

// Error classes every contract knows.
const (
	ClassTransient = "transient"
	ClassPermanent = "permanent"
)

// Bounds of the configs.
const (
	MaxTiers        = 16
	MaxTierDelayMs  = 7 * 24 * 3600 * 1000
	MaxAttempts     = 100
	MaxVisibilityMs = 12 * 3600 * 1000
	maxClassLen     = 64
	maxClasses      = 32
)

// Defaults of the configs, as the topic configs describe them.
var Defaults = map[string]string{
	CfgDeliveryOrder:   OrderRelaxed,
	CfgBackoffMs:       "10000,60000,600000",
	CfgJitter:          "0.1",
	CfgMaxAttempts:     "4",
	CfgDeadLetterTopic: "",
	CfgPermanent:       ClassPermanent,
	CfgVisibilityMs:    "0",
}

// Docs of the configs, for DescribeConfigs.
var Docs = map[string]string{
	CfgDeliveryOrder:   "relaxed (a failed record moves aside), per-key-strict (a nack pauses the record's key for the group until keys:resume) or per-partition-strict (it pauses the partition)",
	CfgBackoffMs:       "comma list of retry tier delays in ms, one tier each (1-16 tiers)",
	CfgJitter:          "fraction 0..1: a tier delay d becomes d*(1±jitter)",
	CfgMaxAttempts:     "deliveries of a record before it is dead-lettered (1-100)",
	CfgDeadLetterTopic: "the dead-letter topic; empty means <topic>.dlq",
	CfgPermanent:       "comma list of error classes that are dead-lettered at once; permanent always is",
	CfgVisibilityMs:    "ms after which a queue delivery neither acked nor nacked is delivered again (0: never, until a rebalance)",
}

// Contract is a topic's parsed delivery contract.
type Contract struct {
	Order       string
	Backoff     []time.Duration // one per tier, at least one
	Jitter      float64
	MaxAttempts int
	DeadLetter  string          // as configured; DeadLetterTopic resolves the default
	Permanent   map[string]bool // always holds ClassPermanent
	Visibility  time.Duration   // 0: no visibility timeout
}

// ValidateConfig checks one contract config value; the error says what is
// wrong in the user's terms.
func ValidateConfig(key, value string) error {
	var c Contract
	return c.set(key, value)
}

// IsConfig reports whether key is one of the contract's configs.
func IsConfig(key string) bool { _, ok := Defaults[key]; return ok }

// ParseContract parses a topic's explicit configs over the defaults.
func ParseContract(configs map[string]string) (Contract, error) {
	var c Contract
	for _, key := range []string{CfgDeliveryOrder, CfgBackoffMs, CfgJitter, CfgMaxAttempts, CfgDeadLetterTopic, CfgPermanent, CfgVisibilityMs} {
		v, ok := configs[key]
		if !ok {
			v = Defaults[key]
		}
		if err := c.set(key, v); err != nil {
			return Contract{}, err
		}
	}
	return c, nil
}

func (c *Contract) set(key, v string) error {
	switch key {
	case CfgDeliveryOrder:
		switch v {
		case OrderRelaxed, OrderPerKeyStrict, OrderPerPartitionStrict:
			c.Order = v
			return nil
		}
		return fmt.Errorf("config %s: %q is not one of relaxed, per-key-strict, per-partition-strict", key, v)
	case CfgBackoffMs:
		parts := strings.Split(v, ",")
		if v == "" || len(parts) > MaxTiers {
			return fmt.Errorf("config %s: %q must list 1 to %d delays in ms, comma-separated", key, v, MaxTiers)
		}
		c.Backoff = c.Backoff[:0]
		for i, p := range parts {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil || n < 1 || n > MaxTierDelayMs {
				return fmt.Errorf("config %s: tier %d: %q is not a delay in ms in [1, %d]", key, i, p, MaxTierDelayMs)
			}
			c.Backoff = append(c.Backoff, time.Duration(n)*time.Millisecond)
		}
	case CfgJitter:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return fmt.Errorf("config %s: %q is not a fraction in [0, 1]", key, v)
		}
		c.Jitter = f
	case CfgMaxAttempts:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxAttempts {
			return fmt.Errorf("config %s: %q is not an integer in [1, %d]", key, v, MaxAttempts)
		}
		c.MaxAttempts = n
	case CfgVisibilityMs:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > MaxVisibilityMs {
			return fmt.Errorf("config %s: %q is not a duration in ms in [0, %d]", key, v, MaxVisibilityMs)
		}
		c.Visibility = time.Duration(n) * time.Millisecond
	case CfgDeadLetterTopic:
		if err := validTopicPart(v, true); err != nil {
			return fmt.Errorf("config %s: %w", key, err)
		}
		c.DeadLetter = v
	case CfgPermanent:
		c.Permanent = map[string]bool{ClassPermanent: true}
		if v == "" {
			return nil
		}
		parts := strings.Split(v, ",")
		if len(parts) > maxClasses {
			return fmt.Errorf("config %s: at most %d classes", key, maxClasses)
		}
		for _, p := range parts {
			p = strings.TrimSpace(p)
			if err := ValidateClass(p); err != nil {
				return fmt.Errorf("config %s: %w", key, err)
			}
			if p == ClassTransient {
				return fmt.Errorf("config %s: %q cannot be permanent", key, p)
			}
			c.Permanent[p] = true
		}
	default:
		return fmt.Errorf("unknown delivery config %q", key)
	}
	return nil
}

// ValidateClass checks an error class name: 1–64 of [a-z0-9._-].
func ValidateClass(class string) error {
	if class == "" || len(class) > maxClassLen {
		return fmt.Errorf("error class %q must have 1 to %d characters", class, maxClassLen)
	}
	for _, r := range class {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '_' && r != '-' {
			return fmt.Errorf("error class %q has %q; use a-z, 0-9, '.', '_' and '-'", class, r)
		}
	}
	return nil
}

// validTopicPart checks a tenant-local topic name by Kafka's rules.
func validTopicPart(name string, emptyOK bool) error {
	switch {
	case name == "" && emptyOK:
		return nil
	case name == "", name == ".", name == "..":
		return fmt.Errorf("%q is not a topic name", name)
	case len(name) > maxTopicLen:
		return fmt.Errorf("topic name of %d characters, at most %d", len(name), maxTopicLen)
	}
	for _, r := range name {
		if !topicByte(r) {
			return fmt.Errorf("topic name %q has %q; use letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

func topicByte(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// Outcome is what a nack leads to.
type Outcome int

const (
	Retry      Outcome = iota // to a retry tier
	DeadLetter                // to the dead-letter topic
	// Paused: a strict topic's record stays where it is and its scope
	// stays paused until keys:resume or keys:skip (the Go helper's answer
	// where Decide says DeadLetter: a strict order never lets a later
	// record pass one that was not processed). Decide never returns it.
	Paused
)

// Decision is Decide's answer.
type Decision struct {
	Outcome Outcome
	Tier    int       // Retry: the tier
	Due     time.Time // Retry: when the copy may be delivered
	Reason  string    // DeadLetter: "permanent" or "exhausted"
}

// Decide is what a failure of delivery number attempt (≥ 1) with class
// leads to at now; rnd returns a uniform float in [0, 1).
func (c Contract) Decide(attempt int, class string, now time.Time, rnd func() float64) Decision {
	switch {
	case c.Permanent[class]:
		return Decision{Outcome: DeadLetter, Reason: "permanent"}
	case attempt >= c.MaxAttempts:
		return Decision{Outcome: DeadLetter, Reason: "exhausted"}
	}
	tier := min(max(attempt-1, 0), len(c.Backoff)-1)
	d := float64(c.Backoff[tier])
	u := rnd()
	if u < 0 || u >= 1 || math.IsNaN(u) {
		u = 0.5
	}
	jittered := time.Duration(d * (1 + c.Jitter*(2*u-1)))
	return Decision{Outcome: Retry, Tier: tier, Due: now.Add(jittered)}
}

// IsStrict reports whether the contract asks for an order a nack must not
// break (part 2 of issue 22 applies it).
func (c Contract) IsStrict() bool { return c.Order != OrderRelaxed }
