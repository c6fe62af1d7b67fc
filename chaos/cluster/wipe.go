package cluster

// wipe.go owns the loss of a broker's disk: everything in its data dir
// removed while the broker is down, as when a machine comes back with a
// new, empty volume. Only a cluster with ExternalEtcd may lose a disk: a
// broker's embedded etcd member keeps its data in the same directory, and
// an etcd member that lost its data cannot simply rejoin.
//
// Invariant: WipeDataDir never touches the directory of a running broker.

import (
	"errors"
	"fmt"
)

// errRunning marks an operation refused because the broker still runs.
var errRunning = errors.New("broker is running")

// WipeDataDir removes everything in broker id's data dir (the directory
// itself stays: it may be a mount point). The broker must be stopped (Kill)
// and the cluster must use ExternalEtcd; Restart then starts it on an empty
// directory under the same node id.
func (c *Cluster) WipeDataDir(id int32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	b, err := c.broker(id)
	if err != nil {
		return err
	}
	if !c.cfg.ExternalEtcd {
		return fmt.Errorf("chaos/cluster: wipe broker %d: its embedded etcd member shares the data dir; wiping needs ExternalEtcd", id)
	}
	if b.proc.running() {
		return fmt.Errorf("chaos/cluster: wipe broker %d: %w", id, errRunning)
	}
	err = emptyDir(b.DataDir)
	c.log.Info().Int32("broker", id).Str("dir", b.DataDir).Err(err).Msg("data dir wiped")
	if err != nil {
		return fmt.Errorf("chaos/cluster: wipe broker %d: %w", id, err)
	}
	return nil
}
