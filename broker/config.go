package broker

import "github.com/sluice-mq/sluice/broker/node"

// Config is everything a broker needs to run (broker/node defines it, as
// the Node below every front end reads it). cmd/sluiced fills it from
// flags and an optional YAML file; tests fill it directly.
type Config = node.Config

// CoordinatorConfig tunes the group coordinator.
type CoordinatorConfig = node.CoordinatorConfig

// DefaultConfig returns the configuration of a single broker on localhost.
func DefaultConfig() Config { return node.DefaultConfig() }

// DefaultCoordinatorConfig returns Kafka's defaults.
func DefaultCoordinatorConfig() CoordinatorConfig { return node.DefaultCoordinatorConfig() }
