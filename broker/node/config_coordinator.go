package node

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/meta"
)

// CoordinatorConfig tunes the group coordinator.
type CoordinatorConfig struct {
	// MinSessionTimeout and MaxSessionTimeout bound members' session
	// timeouts (Kafka's group.min/max.session.timeout.ms: 6 s and 5 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OffsetsRetention is how long offsets outlive the group's last member
	// (Kafka's offsets.retention.minutes: 7 days).
	OffsetsRetention time.Duration
	// TickInterval is how often session, rebalance and sync deadlines are checked.
	TickInterval time.Duration
	// RetentionCheckInterval is how often expired offsets and empty groups
	// are removed (Kafka's offsets.retention.check.interval.ms: 10 min).
	RetentionCheckInterval time.Duration
	// Tenant names the offsets' tenant in etcd.
	Tenant string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultCoordinatorConfig returns Kafka's defaults.
func DefaultCoordinatorConfig() CoordinatorConfig {
	return CoordinatorConfig{
		MinSessionTimeout:      group.DefaultMinSessionTimeout,
		MaxSessionTimeout:      group.DefaultMaxSessionTimeout,
		OffsetsRetention:       group.DefaultOffsetsRetention,
		TickInterval:           250 * time.Millisecond,
		RetentionCheckInterval: 10 * time.Minute,
		Tenant:                 meta.DefaultTenant,
	}
}

// Validate reports the first setting that cannot work.
func (c CoordinatorConfig) Validate() error {
	if err := c.GroupConfig().Validate(); err != nil {
		return fmt.Errorf("broker: coordinator: %w", err)
	}
	if c.TickInterval <= 0 || c.RetentionCheckInterval <= 0 {
		return fmt.Errorf("broker: coordinator: tick %v and retention check %v must be positive", c.TickInterval, c.RetentionCheckInterval)
	}
	if c.Tenant == "" {
		return fmt.Errorf("broker: coordinator: tenant is required")
	}
	return nil
}

func (c CoordinatorConfig) GroupConfig() group.Config {
	return group.Config{
		MinSessionTimeout: c.MinSessionTimeout,
		MaxSessionTimeout: c.MaxSessionTimeout,
		OffsetsRetention:  c.OffsetsRetention,
		NewMemberID:       func(clientID string) string { return clientID + "-" + uuid.NewString() },
	}
}
