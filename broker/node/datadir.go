package node

// This file owns the identity of the data directory and what the broker does
// with local data that the metadata does not know.
//
// The data directory remembers which cluster and which node it belongs to,
// in <data-dir>/sluice.properties (Kafka keeps the same in meta.properties):
//
//	version=1
//	cluster.id=<the cluster id from etcd, 22 characters>
//	node.id=<the broker's --node-id>
//	incarnation=<16 hex digits, random, never 0>
//
// Lines are key=value; a reader refuses a version it does not know and
// ignores keys it does not know within its version. The file is written
// once, atomically and durably (temp file, fsync, rename, directory fsync),
// when a broker first starts on the directory; a file without incarnation
// (written before it existed) gets one, rewritten the same way.
//
// The incarnation names this life of the directory: every replica message
// carries it, and the partition states in etcd record the incarnation each
// replica was last in sync with (docs/architecture.md, "Replica
// incarnations"). A broker restarted on an empty directory (a replaced
// disk) draws a new one, so its replicas, which hold none of what the old
// disk acknowledged, neither vote in elections nor count for a high
// watermark until they have caught up.
//
// Invariant: one broker process at a time uses a data directory (lockFile).
// Invariant: a broker never starts on a data directory of another cluster or
// node: with a wrong --etcd-endpoints, a changed prefix or a wiped etcd the
// cluster id differs and Run refuses, naming both ids, before it opens or
// touches a log.
// Invariant: a data directory's incarnation never changes once written; a
// new one means the directory (and every log in it) is new.
// Invariant: startup never deletes local data. A topic directory whose topic
// etcd does not know is moved aside into <data-dir>/orphans/<time>/ and
// logged; an operator removes it once sure it is not needed.
//
// Only Run's goroutine calls these functions, before serving starts.

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

const (
	IdentityFile    = "sluice.properties"
	identityVersion = 1
	OrphansDir      = "orphans"
	maxIdentitySize = 64 << 10
)

var (
	// ErrForeignDataDir marks a data directory that belongs to another cluster or node.
	ErrForeignDataDir = errors.New("data directory belongs to another cluster or node")
	// ErrDataDirInUse marks a data directory another broker process holds.
	ErrDataDirInUse = errors.New("data directory is in use")
)

// lockFile is the data directory's lock (vfs.Lock: flock on the OS). It is
// released when the broker stops or its process dies, kill -9 included.
const lockFile = ".lock"

// lockDataDir takes the data directory's lock, so that a second broker
// started on the same directory (a copied unit file, a typo in --data-dir)
// stops at once instead of writing the same logs, or waiting forever on the
// embedded etcd's database.
func (b *Node) LockDataDir() (io.Closer, error) {
	if err := vfs.MkdirAllDurable(b.FS, b.Cfg.DataDir); err != nil {
		return nil, fmt.Errorf("broker: create data directory %s: %w", b.Cfg.DataDir, err)
	}
	l, err := vfs.Lock(b.FS, filepath.Join(b.Cfg.DataDir, lockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("broker: %w: %s is held by another broker process (its %s is locked); brokers must not share a data directory",
			ErrDataDirInUse, b.Cfg.DataDir, lockFile)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: lock data directory %s: %w", b.Cfg.DataDir, err)
	}
	return l, nil
}

type dataDirIdentity struct {
	ClusterID   string
	nodeID      int32
	incarnation replica.Incarnation // 0: none recorded (an older file)
}

func (id dataDirIdentity) encode() []byte {
	return fmt.Appendf(nil, "version=%d\ncluster.id=%s\nnode.id=%d\nincarnation=%016x\n",
		identityVersion, id.ClusterID, id.nodeID, uint64(id.incarnation))
}

// newIncarnation draws a random, non-zero incarnation.
func newIncarnation() (replica.Incarnation, error) {
	var b [8]byte
	for {
		if _, err := crand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("broker: draw a data directory incarnation: %w", err)
		}
		if x := binary.LittleEndian.Uint64(b[:]); x != 0 {
			return replica.Incarnation(x), nil
		}
	}
}

func DecodeIdentity(data []byte) (dataDirIdentity, error) {
	var id dataDirIdentity
	kv := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return id, fmt.Errorf("line %q is not key=value", line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if v := kv["version"]; v != strconv.Itoa(identityVersion) {
		return id, fmt.Errorf("version %q, this broker reads version %d", v, identityVersion)
	}
	id.ClusterID = kv["cluster.id"]
	if id.ClusterID == "" {
		return id, errors.New("no cluster.id")
	}
	n, err := strconv.ParseInt(kv["node.id"], 10, 32)
	if err != nil {
		return id, fmt.Errorf("node.id: %w", err)
	}
	id.nodeID = int32(n)
	if v, ok := kv["incarnation"]; ok {
		x, err := strconv.ParseUint(v, 16, 64)
		if err != nil || x == 0 {
			return id, fmt.Errorf("incarnation %q is not a non-zero hex number", v)
		}
		id.incarnation = replica.Incarnation(x)
	}
	return id, nil
}

// checkDataDir compares the data directory's identity with the cluster id
// etcd reports and this broker's node id, writing the identity on first use,
// and sets b.Incarnation.
func (b *Node) CheckDataDir(ctx context.Context, clusterID string) error {
	path := filepath.Join(b.Cfg.DataDir, IdentityFile)
	want := dataDirIdentity{ClusterID: clusterID, nodeID: b.Cfg.NodeID}
	data, err := vfs.ReadFile(b.FS, path, maxIdentitySize)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if want.incarnation, err = newIncarnation(); err != nil {
			return err
		}
		if err := vfs.WriteFileDurable(b.FS, path, want.encode()); err != nil {
			return fmt.Errorf("broker: write %s: %w", path, err)
		}
		b.Incarnation = want.incarnation
		b.Logger.Info().Str("cluster_id", clusterID).Str("path", path).Str("incarnation", fmt.Sprintf("%016x", uint64(want.incarnation))).
			Msg("data directory joined the cluster")
		b.warnIfRemembered(ctx)
		return nil
	case err != nil:
		return fmt.Errorf("broker: read %s: %w", path, err)
	}
	have, err := DecodeIdentity(data)
	if err != nil {
		return fmt.Errorf("broker: %s is damaged (%w); it records which cluster the data belongs to, so the broker will not guess", path, err)
	}
	if have.ClusterID != clusterID {
		return fmt.Errorf("broker: %w: %s says cluster %s, but the metadata store (etcd) reports cluster %s; "+
			"check --etcd-endpoints and the etcd prefix, or restore etcd's data; nothing was changed", ErrForeignDataDir, path, have.ClusterID, clusterID)
	}
	if have.nodeID != b.Cfg.NodeID {
		return fmt.Errorf("broker: %w: %s says node %d, but this broker runs as --node-id %d; nothing was changed",
			ErrForeignDataDir, path, have.nodeID, b.Cfg.NodeID)
	}
	if have.incarnation == 0 {
		// Written before incarnations: the logs are this directory's own,
		// so it gets one now (the partition states know none for it yet).
		if have.incarnation, err = newIncarnation(); err != nil {
			return err
		}
		if err := vfs.WriteFileDurable(b.FS, path, have.encode()); err != nil {
			return fmt.Errorf("broker: write %s: %w", path, err)
		}
	}
	b.Incarnation = have.incarnation
	return nil
}

// warnIfRemembered logs, for a data directory just created, whether etcd
// names this node a replica of partitions: then its disk was lost or
// replaced, and those replicas start empty under a new incarnation. They
// do not count in elections or for the high watermark until they have
// caught up; a partition whose other replicas are gone too stays offline.
// ElectionReadTimeout bounds one read of partition states from etcd.
const ElectionReadTimeout = 2 * time.Second

func (b *Node) warnIfRemembered(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, ElectionReadTimeout)
	defer cancel()
	states, _, err := b.Store.AllPartitions(rctx)
	if err != nil {
		return // only a log line is at stake
	}
	n := 0
	for _, st := range states {
		if slices.Contains(st.Replicas, b.Cfg.NodeID) {
			n++
		}
	}
	if n > 0 {
		b.Logger.Warn().Int("partitions", n).
			Msg("new data directory, but the metadata names this node a replica: its disk was lost or replaced; " +
				"its replicas start empty and count again only once they have caught up with their leaders")
	}
}

// setAsideUnknown moves topic directories under wal/ and state/ whose topic
// id is not in known into <data-dir>/orphans/<time>/, durably, and logs each.
func (b *Node) setAsideUnknown(known map[string]bool) error {
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	for _, sub := range []string{"wal", "state"} {
		root := filepath.Join(b.Cfg.DataDir, sub)
		names, err := b.FS.ReadDir(root)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("broker: read %s: %w", root, err)
		}
		var moved bool
		for _, name := range names {
			if known[name] {
				continue
			}
			dest := filepath.Join(b.Cfg.DataDir, OrphansDir, stamp, sub)
			if err := vfs.MkdirAllDurable(b.FS, dest); err != nil {
				return fmt.Errorf("broker: set aside %s: %w", name, err)
			}
			if err := b.FS.Rename(filepath.Join(root, name), filepath.Join(dest, name)); err != nil {
				return fmt.Errorf("broker: set aside %s: %w", filepath.Join(sub, name), err)
			}
			if err := b.FS.SyncDir(dest); err != nil {
				return fmt.Errorf("broker: set aside %s: %w", name, err)
			}
			moved = true
			b.Logger.Warn().Str("dir", filepath.Join(sub, name)).Str("moved_to", filepath.Join(dest, name)).
				Msg("local data of a topic the metadata does not know was set aside, not deleted; remove it once sure it is not needed")
		}
		if moved {
			if err := b.FS.SyncDir(root); err != nil {
				return fmt.Errorf("broker: set aside in %s: %w", root, err)
			}
		}
	}
	return nil
}

// snapshotPath is where a partition's producer state is snapshotted. It is
// outside the wal directory, which the wal owns entirely.
func (b *Node) snapshotPath(id [16]byte, partition int32) string {
	return filepath.Join(b.Cfg.DataDir, "state", UUIDString(id), fmt.Sprintf("%d.producers", partition))
}

// openJournal opens (and recovers) the broker journal in <data-dir>/journal.
func (b *Node) OpenJournal() error {
	if b.Cfg.PerPartitionFsync {
		return nil
	}
	jcfg := b.Cfg.Journal
	jcfg.ObserveSync = b.M.observeJournalSync
	j, err := wal.OpenJournal(b.FS, filepath.Join(b.Cfg.DataDir, "journal"), jcfg, b.NodeLog)
	if err != nil {
		return fmt.Errorf("broker: open journal: %w", err)
	}
	b.Journal = j
	return nil
}

// closeJournal closes the journal once every log is closed.
func (b *Node) CloseJournal() {
	if b.Journal == nil {
		return
	}
	if err := b.Journal.Close(); err != nil {
		b.Logger.Warn().Err(err).Msg("close journal")
	}
}

// trashDir is where deleted directories are renamed before their removal,
// so a deletion is durable at once and a crash mid-removal leaves nothing
// that looks like live data; startup empties it.
func (b *Node) TrashDir() string { return filepath.Join(b.Cfg.DataDir, "trash") }

func (b *Node) WalDir(id [16]byte, partition int32) string {
	return filepath.Join(b.Cfg.DataDir, "wal", UUIDString(id), fmt.Sprint(partition))
}

// AdvertisedHTTP is the HTTP address other brokers and tools are given: the
// bound address, with the Kafka advertised host when bound to all interfaces.
func AdvertisedHTTP(bound, kafkaAdvertise string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, _, err := net.SplitHostPort(kafkaAdvertise); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}
