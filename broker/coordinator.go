package broker

// This file will own the group coordinator's wiring into the broker. Until
// consumer groups land, the coordinator is empty.

import "context"

type coordinator struct{}

func (b *Broker) startCoordinator(context.Context) error { return nil }

func (b *Broker) stopCoordinator() {}

// groupAPIs returns the dispatch entries of the group coordinator.
func groupAPIs() map[int16]api { return nil }
