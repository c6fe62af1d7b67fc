package broker

// largeobjects.go wires broker/largeobj into the broker: the Service of
// large payloads over the tiering object store and the metadata store,
// its HTTP routes (objapi, through httpapi.SetLargeObjects) and its
// sweeper.
//
// Invariant: the Service exists once Run has opened the object store, if
// that store supports multipart uploads (every store Sluice opens does);
// LargeObjects is nil before, or without one. When it exists it is the
// produce paths' RefClaimer (Config.Refs), set before any listener opens.

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/broker/quota"
)

// defaultUploadSweepInterval is how often upload sessions are swept.
const defaultUploadSweepInterval = time.Minute

// LargeObjects is the service of large payloads: upload sessions, and the
// Claim that the produce paths (HTTP publish with object_ref, Kafka
// produce of sluice.ref envelopes) call for each reference. nil before Run
// opened the object store.
func (b *Broker) LargeObjects() *largeobj.Service { return b.largeObjects }

// startLargeObjects makes the Service; a store without multipart leaves
// large payloads off (logged), which is not an error.
func (b *Broker) startLargeObjects() error {
	svc, err := largeobj.New(largeobj.Config{Store: b.Objects, Sessions: b.Store, Now: b.Cfg.Now,
		Logger: b.NodeLog, TTL: b.Cfg.UploadSessionTTL, MaxObjectBytes: b.Cfg.MaxObjectBytes, Grace: b.Cfg.TierGrace,
		Quotas: largeobj.Quotas{Limits: b.tenantLimits, LogBytes: b.LogStorageBytes, Rejected: b.Tenants.Rejected}})
	if errors.Is(err, largeobj.ErrUnsupported) {
		b.Logger.Warn().Err(err).Msg("large payloads are off")
		return nil
	}
	if err != nil {
		return err
	}
	b.largeObjects = svc
	b.SetLargeObjectBytes(svc.StoredByTenant) // storage_bytes counts them with the logs
	b.registerLargeObjectMetrics(svc)
	if b.Cfg.Refs == nil { // a test may bring its own claimer
		b.Cfg.Refs = svc // set before the listeners start, read-only after
	}
	return nil
}

// tenantLimits answers a tenant's limits from the source Run settles on
// (read per request, so it may be set after the Service is made).
func (b *Broker) tenantLimits(tenant string) quota.Limits {
	if b.Cfg.Quotas == nil {
		return nil
	}
	return b.Cfg.Quotas.Limits(tenant)
}

// largeObjectSweepLoop sweeps upload sessions past their TTL until ctx
// ends (every broker does; the sessions' transactions make that safe).
func (b *Broker) largeObjectSweepLoop(ctx context.Context) {
	if b.largeObjects == nil {
		return
	}
	every := b.Cfg.UploadSweepInterval
	if every <= 0 {
		every = defaultUploadSweepInterval
	}
	b.largeObjects.Run(ctx, every)
}

// registerLargeObjectMetrics exports the sweeps' counts and the reference
// ledger's drops (tier/doc.go, "Large objects"). A registry that has them
// already (a broker restarted in-process) keeps the first.
func (b *Broker) registerLargeObjectMetrics(svc *largeobj.Service) {
	deleted := func(reason string, v func(largeobj.Totals) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_large_objects_deleted_total",
			Help:        "Large payload objects deleted: orphans (completed, never published) at their TTL, released ones once no live record referenced them and the grace ran.",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(v(svc.Totals())) })
	}
	cs := []prometheus.Collector{
		deleted("orphan", func(t largeobj.Totals) int64 { return t.Expired }),
		deleted("released", func(t largeobj.Totals) int64 { return t.Released }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_large_object_sessions_aborted_total",
			Help: "Upload sessions never completed, aborted at their TTL."}, func() float64 { return float64(svc.Totals().Aborted) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_large_object_orphans",
			Help: "Upload sessions completed and not published, as of the last sweep (deleted at their TTL unless claimed)."},
			func() float64 { return float64(svc.Totals().Orphans) }),
	}
	if b.Tiers != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_large_object_refs_dropped_total",
			Help: "Reference ledger entries dropped because every record of their partition naming the object fell below its log start."},
			func() float64 { return float64(b.Tiers.Stats().LargeRefsDropped) }))
	}
	for _, c := range cs {
		if err := b.M.Reg.Register(c); err != nil {
			b.Logger.Debug().Err(err).Msg("large object metrics registered already")
		}
	}
}
