package quota

// This file owns Meters, one broker's rate meters of every tenant with a
// rate quota: a Bucket per tenant and key at the tenant's local share of
// the cluster-wide rate (split.go), the usage each broker publishes for
// the split, and the per-tenant connection count (which alone moves the
// sluice_tenant_connections gauge, and counts its refusals).
//
// Invariant: a bucket exists only for a key the tenant has a limit of, and
// its rate is that limit times this broker's share, as of the last call
// that touched it; a removed limit drops the bucket (and its debt).
// Invariant: every unit recorded is counted in the usage of the period it
// was recorded in, whether or not the key has a limit, for tenants with
// any limit; TakeUsage empties it.
//
// mu guards every field below it; no method blocks or does I/O while it
// holds mu, and nothing is called out of it but Source.Limits and the
// metrics' (lock-free) counters.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Meters are one broker's meters of every tenant's rate quotas. Safe for
// concurrent use; the zero value is unusable, use NewMeters.
type Meters struct {
	src     Source
	burst   time.Duration
	metrics *Metrics

	// burstOf, if set, is each tenant's burst window now (the disk
	// ladder's second step lowers it for low-priority tenants).
	burstOf atomic.Pointer[func(tenant string) time.Duration]

	mu      sync.Mutex
	tenants map[string]*tenantMeters      // guarded by mu
	shares  map[string]map[string]float64 // guarded by mu: tenant → key → fraction; absent = def
	def     float64                       // guarded by mu: the share of a key without one; 1 at first
}

type tenantMeters struct {
	buckets map[string]*Bucket
	used    map[string]float64 // units recorded since the last TakeUsage, by key
	held    map[string]bool    // whether a Record of the key answered a delay since then
	conns   int                // open connections on this broker
}

// NewMeters returns the meters of the limits src answers. burst ≤ 0 is
// DefaultBurst; metrics may be nil.
func NewMeters(src Source, burst time.Duration, metrics *Metrics) *Meters {
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Meters{src: src, burst: burst, metrics: metrics,
		tenants: map[string]*tenantMeters{}, shares: map[string]map[string]float64{}, def: 1}
}

// Metrics are the meters' metrics (nil without).
func (m *Meters) Metrics() *Metrics { return m.metrics }

// Burst is the burst window of every bucket (unless SetBurstPolicy says
// otherwise for a tenant).
func (m *Meters) Burst() time.Duration { return m.burst }

// SetBurstPolicy makes fn decide each tenant's burst window from now on
// (nil: Burst for every tenant). fn is called with the meters' lock held:
// it must be cheap and must not call back into m.
func (m *Meters) SetBurstPolicy(fn func(tenant string) time.Duration) {
	if fn == nil {
		m.burstOf.Store(nil)
		return
	}
	m.burstOf.Store(&fn)
}

func (m *Meters) burstFor(tenant string) time.Duration {
	if fn := m.burstOf.Load(); fn != nil {
		if d := (*fn)(tenant); d > 0 {
			return d
		}
	}
	return m.burst
}

// perBroker reports whether a key's limit applies to each broker as it is
// rather than being split: request_percentage is a share of one broker's
// handler time.
func perBroker(key string) bool { return key == RequestPercentage }

// unitsPerSecond converts a limit to the units Record is given:
// request_percentage is percent of a second of handler time per second,
// recorded in seconds.
func unitsPerSecond(key string, limit float64) float64 {
	if key == RequestPercentage {
		return limit / 100
	}
	return limit
}

// localRate is this broker's rate of key for the tenant, or 0 when the
// tenant has no such limit. Called with mu held.
func (m *Meters) localRate(tenant, key string, limits Limits) float64 {
	limit, ok := limits[key]
	if !ok || limit <= 0 {
		return 0
	}
	rate := unitsPerSecond(key, limit)
	if !perBroker(key) {
		rate *= m.share(tenant, key)
	}
	return rate
}

// share is this broker's share of the tenant's key. Called with mu held.
func (m *Meters) share(tenant, key string) float64 {
	if s, ok := m.shares[tenant][key]; ok {
		return s
	}
	return m.def
}

// tenant returns the tenant's meters, creating them. Called with mu held.
func (m *Meters) tenant(name string) *tenantMeters {
	t := m.tenants[name]
	if t == nil {
		t = &tenantMeters{buckets: map[string]*Bucket{}, used: map[string]float64{}, held: map[string]bool{}}
		m.tenants[name] = t
	}
	return t
}

// bucket returns the tenant's bucket of key at its current local rate, or
// nil when the tenant has no limit of key. Called with mu held.
func (m *Meters) bucket(t *tenantMeters, tenant, key string, limits Limits, now time.Time) *Bucket {
	rate := m.localRate(tenant, key, limits)
	b := t.buckets[key]
	switch {
	case rate == 0:
		if b != nil {
			delete(t.buckets, key)
		}
		return nil
	case b == nil:
		b = NewBucket(rate, m.burstFor(tenant), now)
		t.buckets[key] = b
	default:
		b.SetRate(rate, now)
		b.SetBurst(m.burstFor(tenant), now)
	}
	return b
}

// Record charges n units of key (bytes, records, seconds of handler time)
// to the tenant at now and returns how long the tenant's client must be
// held (0: not at all). It never refuses: what was received is charged.
func (m *Meters) Record(tenant, key string, n float64, now time.Time) time.Duration {
	m.metrics.recorded(tenant, key, n)
	limits := m.src.Limits(tenant)
	if len(limits) == 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tenant(tenant)
	t.used[key] += n
	b := m.bucket(t, tenant, key, limits, now)
	if b == nil {
		return 0
	}
	d := b.Record(n, now)
	if d > 0 {
		t.held[key] = true
	}
	return d
}

// Delay is how long the tenant's client must be held for key at now,
// charging nothing.
func (m *Meters) Delay(tenant, key string, now time.Time) time.Duration {
	limits := m.src.Limits(tenant)
	if _, ok := limits[key]; !ok {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tenant(tenant)
	if b := m.bucket(t, tenant, key, limits, now); b != nil {
		if d := b.Delay(now); d > 0 {
			t.held[key] = true
			return d
		}
	}
	return 0
}

// FetchCap is how many units of key one fetch of the tenant may take at
// this broker's share (FetchSlice of its rate, or the burst window when
// that is shorter), and whether it has a limit of key: the cap of a
// fetch's max_bytes.
func (m *Meters) FetchCap(tenant, key string) (float64, bool) {
	limits := m.src.Limits(tenant)
	if _, ok := limits[key]; !ok {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.localRate(tenant, key, limits) * min(FetchSlice, m.burst).Seconds(), true
}

// Refusal reasons of OpenConn, as counted in the refused-connections metric.
const (
	RefusedCreationRate = "tenant_connection_creation_rate"
	RefusedConnections  = "tenant_connections"
)

// OpenConn counts a new connection of the tenant (once the tenant is known,
// after authentication) and reports "" when it may stay open, else why it
// must be closed (RefusedCreationRate, RefusedConnections); a refused
// connection is not counted and must not be closed with CloseConn.
func (m *Meters) OpenConn(tenant string, now time.Time) string {
	limits := m.src.Limits(tenant)
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tenant(tenant)
	if limit, ok := limits[Connections]; ok {
		// A cluster-wide count: this broker's share, at least one.
		local := math.Max(1, math.Ceil(limit*m.share(tenant, Connections)))
		if float64(t.conns) >= local {
			m.metrics.Rejected(tenant, Connections)
			return RefusedConnections
		}
	}
	if b := m.bucket(t, tenant, ConnectionCreationRate, limits, now); b != nil {
		if !b.Take(1, now) {
			m.metrics.Rejected(tenant, ConnectionCreationRate)
			return RefusedCreationRate
		}
		t.used[ConnectionCreationRate]++
	}
	t.conns++
	m.metrics.connsMoved(tenant, 1)
	return ""
}

// CloseConn uncounts a connection OpenConn admitted.
func (m *Meters) CloseConn(tenant string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tenants[tenant]; t != nil && t.conns > 0 {
		t.conns--
		m.metrics.connsMoved(tenant, -1)
	}
}

// Inflight is the tenant's limit of requests in flight per connection
// (inflight_requests) and whether it has one.
func (m *Meters) Inflight(tenant string) (int, bool) {
	v, ok := m.src.Limits(tenant)[InflightRequests]
	if !ok || v < 1 {
		return 0, false
	}
	return int(v), true
}

// SetShares replaces this broker's shares of every tenant's cluster-wide
// rates (split.go): tenant → key → fraction in (0, 1]; a key absent from
// shares has the share def (DefaultShare). Until the first call every key
// is taken whole, as on a broker alone.
func (m *Meters) SetShares(shares map[string]map[string]float64, def float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shares, m.def = shares, def
}

// Headroom is what a broker adds to the rate it let through of a key it
// held no client of, in the demand it publishes (split.go): its clients
// may be slowed by another broker that holds them, and would send more
// here once that one lets them.
const Headroom = 1.25

// TakeUsage returns what the broker measured since the last call, as a
// demand for the split: per tenant and key, units per second over elapsed,
// doubled for a key whose client was held (its real demand is more than
// it was let through; see split.go) and raised by Headroom for one whose
// clients were not, and the open connections. It starts
// the next period, drops the meters of tenants that have no limits any
// more and are idle, and updates the utilisation metric.
func (m *Meters) TakeUsage(elapsed time.Duration) Demand {
	out := Demand{}
	if elapsed <= 0 {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, t := range m.tenants {
		limits := m.src.Limits(name)
		if len(limits) == 0 && t.conns == 0 {
			delete(m.tenants, name)
			continue
		}
		d := map[string]float64{}
		for key, n := range t.used {
			rate := n / elapsed.Seconds()
			if local := m.localRate(name, key, limits); local > 0 {
				m.metrics.utilisation(name, key, rate/local)
			}
			if t.held[key] {
				rate *= 2
			} else {
				rate *= Headroom
			}
			d[key] = rate
		}
		if t.conns > 0 {
			d[Connections] = float64(t.conns)
		}
		if len(d) > 0 {
			out[name] = d
		}
		clear(t.used)
		clear(t.held)
	}
	return out
}

// Limit is the tenant's limit of key and whether it has one (for counts
// enforced outside the meters, such as object_downloads).
func (m *Meters) Limit(tenant, key string) (float64, bool) {
	v, ok := m.src.Limits(tenant)[key]
	return v, ok
}
