package meta

// This file owns the controller election: brokers campaign under
// <prefix>controller/ with an etcd concurrency.Election, each on its own
// session lease; the candidate whose key has the lowest create revision is
// the controller.
//
//	<prefix>controller/<lease id, hex>    node id, decimal (raw string), bound to the
//	                                      candidate's session lease
//
// Invariant: the controller epoch is the create revision of the
// controller's election key. A controller is only elected once every key
// created before its own is gone, so each controller's epoch is greater than
// every earlier controller's: epochs strictly increase.
// Invariant: a deposed controller's key is gone (resigned, lease expired or
// revoked), so a transaction guarded by its IfLeader compare fails even if
// it has not yet noticed that it lost; every controller write must carry it.
//
// Each Controller owns one goroutine (counted in Store.watchers, so
// Store.Close stops it) that closes Lost when the session ends or the key is
// deleted. Controller.mu guards resigned; only the first Resign uses the
// election.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultControllerTTL is the session TTL Campaign uses when given zero: a
// controller that dies without resigning is replaced within about this long
// (plus etcd's own election when the dead broker also led etcd: a new etcd
// leader grants every lease a fresh TTL). Partitions the dead controller led
// wait for its successor, so this is their failover time too. 2 s is the
// shortest lease etcd grants with its default 1 s election timeout; the
// session renews it every third of that, and a controller lost to a slow
// renewal only moves the post (every controller write is fenced by
// IfLeader), so a short lease costs no safety.
const DefaultControllerTTL = 2 * time.Second

// ErrControllerLost: the session ended before the campaign's win could be used.
var ErrControllerLost = errors.New("meta: controller leadership lost")

func (s *Store) electionPrefix() string { return s.prefix + "controller" } // concurrency adds the "/"

// Controller is this broker's tenure as the cluster controller, from the
// won Campaign until Resign or loss of its session.
type Controller struct {
	s        *Store
	nodeID   int32
	session  *concurrency.Session
	election *concurrency.Election
	key      string             // our election key
	epoch    int64              // create revision of key
	cancel   context.CancelFunc // stops the session keep-alive and the watchdog's watch
	lost     chan struct{}      // closed by the watchdog when it returns
	done     chan struct{}      // closed when the watchdog has returned

	mu       sync.Mutex
	resigned bool // guarded by mu
}

// Campaign blocks until this broker is the controller, or ctx ends (its key
// is then withdrawn). The campaign holds a session lease of ttl
// (DefaultControllerTTL if zero, rounded up to whole seconds) kept alive
// until Resign; if the process dies, another candidate takes over once the
// lease expires.
func (s *Store) Campaign(ctx context.Context, nodeID int32, ttl time.Duration) (*Controller, error) {
	if nodeID < 0 || ttl < 0 {
		return nil, fmt.Errorf("meta: campaign: node id %d, ttl %v: %w", nodeID, ttl, ErrInvalidBroker)
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("meta: campaign for node %d: %w", nodeID, err)
	}
	if ttl == 0 {
		ttl = DefaultControllerTTL
	}
	grant, err := s.client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("meta: campaign for node %d: grant lease: %w", nodeID, err)
	}
	// The session's context is ours, not ctx: it must outlive Campaign.
	sctx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*Controller, error) {
		cancel()
		s.revokeQuietly(grant.ID)
		return nil, fmt.Errorf("meta: campaign for node %d: %w", nodeID, err)
	}
	session, err := concurrency.NewSession(s.client, concurrency.WithLease(grant.ID), concurrency.WithContext(sctx))
	if err != nil {
		return fail(err)
	}
	election := concurrency.NewElection(session, s.electionPrefix())
	if err := election.Campaign(ctx, strconv.FormatInt(int64(nodeID), 10)); err != nil {
		return fail(err)
	}
	c := &Controller{
		s: s, nodeID: nodeID, session: session, election: election,
		key: election.Key(), epoch: election.Rev(), cancel: cancel,
		lost: make(chan struct{}), done: make(chan struct{}),
	}
	// Campaign only waited for older keys to go; ours may have expired meanwhile.
	resp, err := s.client.Get(ctx, c.key)
	if err != nil {
		return fail(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != c.epoch {
		return fail(ErrControllerLost)
	}
	if !s.own() {
		return fail(ErrClosed)
	}
	wch := s.client.Watch(sctx, c.key, clientv3.WithRev(resp.Header.Revision+1))
	go c.watchdog(wch)
	s.log.Info().Int32("node_id", nodeID).Int64("epoch", c.epoch).Msg("elected controller")
	return c, nil
}

// watchdog closes lost when the session ends (lease expired, revoked, or
// keep-alive stopped), when the key is deleted, or when the Store closes.
func (c *Controller) watchdog(wch clientv3.WatchChan) {
	defer c.s.watchers.Done()
	defer close(c.done)
	defer close(c.lost)
	defer c.cancel()
	for {
		select {
		case <-c.session.Done():
			c.logLost("session ended")
			return
		case <-c.s.done:
			c.logLost("store closed")
			return
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				// Cancelled (Resign) or compacted: the session still tells.
				wch = nil
				continue
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					c.logLost("election key deleted")
					return
				}
			}
		}
	}
}

func (c *Controller) logLost(why string) {
	c.mu.Lock()
	resigned := c.resigned
	c.mu.Unlock()
	if !resigned {
		c.s.log.Warn().Int32("node_id", c.nodeID).Int64("epoch", c.epoch).Str("reason", why).Msg("controller leadership lost")
	}
}

// Epoch is the controller epoch: greater than that of every earlier controller.
func (c *Controller) Epoch() int64 { return c.epoch }

// NodeID is the broker that campaigned.
func (c *Controller) NodeID() int32 { return c.nodeID }

// Lost is closed when this broker is no longer the controller, or may no
// longer be: session expired or revoked, key deleted, Resign, or the Store
// closed. etcd may have elected another controller up to a keep-alive
// interval before Lost closes; IfLeader fences that window.
func (c *Controller) Lost() <-chan struct{} { return c.lost }

// IfLeader is a transaction comparison that holds only while this
// controller's election key exists at its epoch. Put it in every controller
// transaction so a deposed controller's writes fail.
func (c *Controller) IfLeader() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.epoch)
}

// Resign gives up leadership: it deletes the election key (another
// candidate takes over at once), stops the session and revokes its lease.
// Lost is closed when it returns. It is idempotent.
func (c *Controller) Resign(ctx context.Context) error {
	c.mu.Lock()
	again := c.resigned
	c.resigned = true
	c.mu.Unlock()
	if again {
		<-c.done
		return nil
	}
	select {
	case <-c.s.done: // the client is closed; the lease is left to expire
		<-c.done
		return nil
	default:
	}
	err := c.election.Resign(ctx)
	c.session.Orphan() // stops the keep-alive; the lease is revoked below with ctx
	c.cancel()
	<-c.done
	if err != nil {
		return fmt.Errorf("meta: controller %d resign: delete election key: %w", c.nodeID, err)
	}
	if _, err := c.s.client.Revoke(ctx, c.session.Lease()); err != nil {
		// The key is gone already; a failed revoke only keeps an empty lease until its TTL.
		c.s.log.Warn().Err(err).Int32("node_id", c.nodeID).Msg("controller resign: revoke lease failed")
	}
	c.s.log.Info().Int32("node_id", c.nodeID).Int64("epoch", c.epoch).Msg("controller resigned")
	return nil
}

// ControllerID reports the current controller's node id and epoch, or -1
// and 0 when there is none.
func (s *Store) ControllerID(ctx context.Context) (int32, int64, error) {
	resp, err := s.client.Get(ctx, s.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return -1, 0, fmt.Errorf("meta: read controller: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return -1, 0, nil
	}
	kv := resp.Kvs[0]
	id, err := strconv.ParseInt(string(kv.Value), 10, 32)
	if err != nil || id < 0 {
		return -1, 0, fmt.Errorf("meta: controller key %q holds %q: %w", kv.Key, kv.Value, ErrCorrupt)
	}
	return int32(id), kv.CreateRevision, nil
}
