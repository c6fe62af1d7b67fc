package node

// This file owns the opening and closing of one replica of an existing
// partition while the broker runs: a partition reassignment
// (broker/cluster/reassign.go) names this broker a replica of a partition
// it did not host, or drops it from one it hosted.
//
// Invariant: a replica is opened only when the partition state names this
// broker, and closed (its local log and producer state deleted) only when
// the state no longer does; what it held is on the other replicas and in
// object storage, and a later return starts it empty. The caller holds
// AdminMu, as for every registry change.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// HostPartition opens and starts this broker's replica of partition i of
// t, which the state t.States[i] names and which it does not host yet,
// and registers the topic with it. A new replica's log starts empty (at
// the remote end on a tiered topic) and copies the rest from the leader.
func (b *Node) HostPartition(t *Topic, i int32) error {
	if i < 0 || int(i) >= len(t.Partitions) || t.Partitions[i] != nil || !b.hosts(t.States[i]) {
		return fmt.Errorf("broker: host %s-%d: not a partition this broker should open", t.Meta.Name, i)
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	p, err := b.openPartition(&nt, i)
	if err != nil {
		return err
	}
	nt.Partitions[i] = p
	b.ReplaceTopic(&nt)
	b.startPartition(p)
	p.SetState(CoreState(nt.States[i]))
	b.Logger.Info().Str("topic", t.Meta.Name).Int32("partition", i).Int64("log_end", int64(p.Log().EndOffset())).
		Msg("now a replica of the partition: copying from its leader")
	return nil
}

// UnhostPartition stops this broker's replica of partition i of t, which
// the state t.States[i] no longer names, and deletes its local log and
// producer state.
func (b *Node) UnhostPartition(t *Topic, i int32) {
	if i < 0 || int(i) >= len(t.Partitions) || t.Partitions[i] == nil || b.hosts(t.States[i]) {
		return
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	p := nt.Partitions[i]
	nt.Partitions[i] = nil
	b.ReplaceTopic(&nt)
	p.StopAndClose()
	if err := vfs.RemoveAllDurable(b.FS, b.WalDir(t.Meta.ID, i), b.TrashDir()); err != nil {
		b.Logger.Error().Err(err).Str("topic", t.Meta.Name).Int32("partition", i).Msg("remove the log of a partition this broker no longer hosts")
	}
	if err := b.FS.Remove(b.snapshotPath(t.Meta.ID, i)); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.Logger.Warn().Err(err).Str("topic", t.Meta.Name).Int32("partition", i).Msg("remove the producer snapshot of a partition this broker no longer hosts")
	}
	b.Logger.Info().Str("topic", t.Meta.Name).Int32("partition", i).Str("dir", filepath.Base(b.WalDir(t.Meta.ID, i))).
		Msg("no longer a replica of the partition: its local log is deleted")
}
