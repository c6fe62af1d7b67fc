package cluster

// This file owns the Cluster: this broker's part in the cluster —
// registration and the live-broker view, the controller's election and
// its elector, isolation, the replication transport between brokers, the
// follower fetchers and the published in-sync sets — over its Node.
//
// Invariant: the cluster package knows no protocol front end. What it
// needs of them (the addresses they bound, to register) it is given
// through SetAddrs before Start.

import (
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
)

// Addrs are the addresses this broker registers for the others.
type Addrs struct {
	Kafka       string // the Kafka listener clients are told
	HTTP        string // the bound HTTP listener
	InterBroker string // the inter-broker listener the other brokers dial
	// Listeners are the advertised address of each Kafka listener, by
	// name, so Metadata answers on the listener a request came in on.
	Listeners map[string]string
}

// Cluster is this broker's membership of the cluster.
type Cluster struct {
	*node.Node

	addrs       Addrs
	reg         atomic.Pointer[meta.Registration] // set by register before serving; replaced after a lost lease
	liveBrokers atomic.Pointer[[]meta.BrokerInfo] // cluster.go
	draining    atomic.Pointer[[]int32]           // drain.go: node ids with a drain mark, sorted
	controller  atomic.Int32                      // node id of the controller; -1: unknown
	ctlResign   chan struct{}                     // capacity 1: the controller should step aside (isolation.go)
	clusterWG   sync.WaitGroup                    // the cluster watchers
	fetch       fetchers                          // follower fetchers, one per leader (fetcher.go)
	repl        replication                       // replication_transport.go, elector.go
	isr         inSyncState                       // published in-sync sets (isr_publish.go)
	ticksHeld   atomic.Bool                       // HoldTicksForTest: the replica cores are not ticked
}

// New returns the cluster role of the broker whose state is n, and sets
// the Node's hooks into it.
func New(n *node.Node) *Cluster {
	c := &Cluster{Node: n, ctlResign: make(chan struct{}, 1)}
	n.Hooks.Place = c.place
	n.Hooks.PlaceMore = c.placeMore
	n.Hooks.AwaitLeaders = c.awaitLeaders
	n.Hooks.ControllerID = c.ControllerID
	n.Hooks.Net = func(key node.PartitionKey) partition.Net { return partitionNet{b: c, key: key} }
	return c
}

// HoldTicksForTest stops (true) or resumes (false) the ticks of this
// broker's replica cores, so that a test can hold a leader's parked
// fetches past their requests' MaxWait, as a loaded machine whose ticks
// run late does. Only tests call it.
func (b *Cluster) HoldTicksForTest(held bool) { b.ticksHeld.Store(held) }

// SetAddrs records the addresses to register; call it before Start.
func (b *Cluster) SetAddrs(a Addrs) { b.addrs = a }

// WaitCluster returns once the goroutines StartCluster started have ended
// (their context is done).
func (b *Cluster) WaitCluster() { b.clusterWG.Wait() }

// OwnRegistration is this broker's current registration in etcd; nil
// before it registered.
func (b *Cluster) OwnRegistration() *meta.Registration { return b.reg.Load() }

// OfflinePartitions counts the partitions this broker, as the controller,
// found without a quorum of replicas able to vote (lost disks).
func (b *Cluster) OfflinePartitions() int64 { return b.repl.offline.Load() }
