package console

// This file owns the sampler: one goroutine that, every History.Interval,
// lists the groups and records the lag of each one this broker coordinates
// (GET /v1/groups and GET /v1/groups/{group}/lag, asked in process as the
// broker itself) into the History, so the group pages chart the last hour
// without Prometheus. Only the coordinator's own groups: a lag request for
// another broker's group is forwarded to it over HTTP, where the broker's
// own identity does not travel; so a group's history is kept by its
// coordinator, and another broker's group page links there.
//
// Invariant: one round at a time, each bounded by the interval; a group
// whose lag cannot be read this round gets no sample (a gap in its chart),
// never a made-up one.
// Invariant: Run returns when its context ends; its owner waits for it.

import (
	"context"
	"time"
)

// Run samples until ctx ends. Call it after Mount.
func (c *Console) Run(ctx context.Context) {
	iv := c.history.cfg.Interval
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		c.SampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleOnce records one round of every group's lag.
func (c *Console) SampleOnce(ctx context.Context) {
	if c.system == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.history.cfg.Interval)
	defer cancel()
	sys := api{h: c.system}
	var groups groupsAnswer
	if err := sys.get(ctx, "/v1/groups", nil, &groups); err != nil {
		c.log.Debug().Err(err).Msg("console sampler: list groups")
		return
	}
	samples := map[Key]Sample{}
	for _, g := range groups.Groups {
		if c.cfg.Node != nil && g.Coordinator != c.cfg.Node.Cfg.NodeID {
			continue
		}
		var lag lagAnswer
		if err := sys.get(ctx, "/v1/groups/"+escape(g.Group)+"/lag", nil, &lag); err != nil {
			c.log.Debug().Err(err).Str("group", g.Group).Msg("console sampler: group lag")
			continue
		}
		for _, p := range lag.Partitions {
			if p.Error != "" {
				continue
			}
			samples[Key{Group: g.Group, Topic: p.Topic, Partition: p.Partition}] = Sample{
				Lag: p.Lag, LagBytes: p.LagBytes, OldestAgeMs: p.OldestAgeMs}
		}
	}
	c.history.Record(c.cfg.Now(), samples)
}
