package broker

// This file owns the composition of the operator console (broker/console):
// it is built over this broker's Node, mounted on the HTTP front end's /ui
// route (httpapi.SetConsole), and its lag sampler runs with the broker's
// other maintenance loops.

import (
	"context"

	"github.com/sluice-mq/sluice/broker/console"
)

// newConsole builds the console and mounts it on the HTTP front end; call
// it after the front end is built and before its handler.
func (b *Broker) newConsole() error {
	c, err := console.New(console.Config{Node: b.Node, Logger: b.Logger, Now: b.Cfg.Now, TierGrace: b.Cfg.TierGrace})
	if err != nil {
		return err
	}
	b.console = c
	b.http.SetConsole(c.Mount)
	return nil
}

// consoleLoop samples the console's lag history until ctx ends.
func (b *Broker) consoleLoop(ctx context.Context) { b.console.Run(ctx) }
