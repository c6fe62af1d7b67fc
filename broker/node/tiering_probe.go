package node

// tiering_probe.go owns the broker's check of its object store: a broker
// whose store cannot be reached, has no such bucket, or refuses these
// credentials is not ready (/readyz answers 503 with the store's answer)
// until a probe passes. The probe (tier.Probe) writes, reads, lists and
// deletes one small object of this broker's own, so it proves write
// permission, not only that the endpoint answers.
//
// The first probe runs when tiering starts; a failed one is retried in the
// background with a backoff, until one passes. After that the store is not
// probed again: a later outage of object storage is transient, the broker
// keeps serving from its local logs, and the tiering manager retries and
// reports it (its metrics and warnings); taking every broker out of a load
// balancer for it would turn a delay of uploads into an outage.
//
// Invariant: a failing store is logged at ERROR once (the first failure)
// and its recovery at INFO once; the retries in between log at DEBUG.
// storeProbe.problem is atomic: written by the probe goroutine only, read
// by /readyz. The goroutine is owned by startTiering/stopTiering.

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// Backoff of the probe while it fails: quick at first (a store that is
// still starting), then at most every storeProbeMaxWait.
const (
	storeProbeFirstWait = 500 * time.Millisecond
	storeProbeMaxWait   = 10 * time.Second
	storeProbeTimeout   = 30 * time.Second
)

// storeProbe is the object store's readiness.
type storeProbe struct {
	problem atomic.Pointer[string] // nil once a probe passed; else why the store is not usable
	cancel  context.CancelFunc
	done    chan struct{} // closed when the probe goroutine returns
}

// storeNotReady is why the object store keeps the broker from being ready,
// or "" when it does not.
func (b *Node) StoreNotReady() string {
	if why := b.probe.problem.Load(); why != nil {
		return *why
	}
	return ""
}

// startStoreProbe starts probing store (named url in messages) until a
// probe passes; stopStoreProbe ends it.
func (b *Node) startStoreProbe(store objstore.Store, url string) {
	name := redactStoreURL(url)
	pending := fmt.Sprintf("object store %s: not checked yet", name)
	b.probe.problem.Store(&pending)
	ctx, cancel := context.WithCancel(context.Background())
	b.probe.cancel, b.probe.done = cancel, make(chan struct{})
	go func() {
		defer close(b.probe.done)
		b.probeStoreUntilUsable(ctx, store, name)
	}()
}

func (b *Node) stopStoreProbe() {
	if b.probe.cancel != nil {
		b.probe.cancel()
		<-b.probe.done
	}
}

// probeStoreUntilUsable probes until a probe passes or ctx ends.
func (b *Node) probeStoreUntilUsable(ctx context.Context, store objstore.Store, name string) {
	key := tier.ProbeKey(b.Cfg.NodeID)
	wait := storeProbeFirstWait
	failures := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
		err := tier.Probe(pctx, store, key)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			b.probe.problem.Store(nil)
			ev := b.Logger.Info().Str("object_store", name).Int64("read_cache_bytes", b.Cfg.ReadCacheBytes)
			if failures > 0 {
				ev.Int("failed_probes", failures).Msg("object store usable again; tiering ready, and the broker with it")
			} else {
				ev.Msg("tiering ready")
			}
			return
		}
		why := fmt.Sprintf("object store %s: %v", name, err)
		b.probe.problem.Store(&why)
		failures++
		if failures == 1 {
			b.Logger.Error().Err(err).Str("object_store", name).
				Msg("object store not usable (unreachable, no such bucket, or these credentials may not write it): the broker is not ready (/readyz) and checks again in the background")
		} else {
			b.Logger.Debug().Err(err).Str("object_store", name).Int("failed_probes", failures).Msg("object store still not usable")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, storeProbeMaxWait)
	}
}

// redactStoreURL hides a password in the URL, for logs and /readyz.
func redactStoreURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}
