package quota

// This file owns the split of a tenant's cluster-wide rate quota among the
// brokers its traffic lands on.
//
// Every SplitPeriod each broker publishes what it measured of each
// tenant's keys in the last period (its demand: units per second, raised
// as below), under a key bound to its registration lease, reads every live
// broker's, and sets its local rate of the tenant's key to quota × share.
// A broker measures only what it let through, so the demand it publishes
// asks for more than that: twice it for a key it held a client of (its
// clients want more than they got), and a quarter more (Headroom) for one
// it did not hold (its clients may be waiting elsewhere: a producer whose
// buffer is full of records for a broker that holds it sends this one
// only as fast as that one lets it through).
//
// The shares are a max-min fair split of the quota over the demands d_i:
//
//	Σ d ≤ quota:  share_i = d_i / Σ d                 (all of it, in proportion)
//	Σ d > quota:  share_i = min(d_i, L) / quota       with Σ min(d_i, L) = quota
//
// then raised to at least 1 / (2 × live brokers) for a broker with demand,
// so one that sees new traffic starts from that floor rather than from
// nothing while its demand becomes known; a key nobody has demand of is
// split equally. A broker that is the only one with demand takes the whole
// quota. The water level L gives every broker whose demand is below it all
// it asks (with its headroom) and splits the rest equally among those that
// ask for more, which is what lets the split converge when one client's
// traffic is coupled across brokers: a proportional split (this file's
// first version) oscillated there, the held brokers' doubled demands
// taking the share the unheld one then lacked, and a producer writing to
// partitions on all three brokers got 72% of its quota
// (TestClusterProduceQuotaFollowsTraffic; TestSplitCoupledClient
// simulates it).
//
// Error bound. The shares sum to 1 except by the floors: Σ shares ≤ 1 +
// Σ floors of brokers below their floor ≤ 1.5. A floor is used only by a
// broker that has traffic, so the cluster over-admits only while traffic
// moves to a broker the last split saw idle, and by at most (live − 1) ×
// quota / (2 × live) for the time it takes that broker's demand to be
// published and read: one period (2 s) plus one publish. It under-admits by
// up to the same during the same period (the broker the traffic left still
// holds its share). Each broker's bucket also lends one burst window of
// its share. So over a span T with k moves of traffic, the cluster's rate
// is within quota × (1 ± (k × 2 × SplitPeriod / 2 + burst) / T); for 60 s
// and a move every 20 s that is about ±10%, and TestSplitThreeBrokers
// measures it. A client coupled across brokers reaches its equal split
// within about four periods (TestSplitCoupledClient).
//
// Invariant: every share is in (0, 1]; Shares is a pure function of the
// demands it is given, so every broker computes the same split.

import (
	"math"
	"slices"
	"time"
)

// SplitPeriod is how often a broker publishes its demand and recomputes its
// shares.
const SplitPeriod = 2 * time.Second

// Demand is one broker's measured demand: tenant → key → units per second
// (for Connections, the open connections).
type Demand map[string]map[string]float64

// Shares returns the share of each tenant's keys of the broker self, given
// every live broker's demand (by broker name; self's own included, a
// broker absent has none), the number of live brokers (at least the
// brokers in demands) and the cluster-wide limits (limit(tenant, key), in
// the demands' unit; nil, or a key without a limit: the whole is split in
// proportion to the demands). Tenant keys absent from the answer have no
// demand anywhere: their share is DefaultShare(live).
func Shares(self string, demands map[string]Demand, live int, limit func(tenant, key string) (float64, bool)) map[string]map[string]float64 {
	live = max(live, len(demands), 1)
	floor := 1 / (2 * float64(live))
	type keyDemands struct {
		mine float64
		all  []float64
	}
	byKey := map[string]map[string]*keyDemands{}
	for broker, d := range demands {
		for tenant, keys := range d {
			k := byKey[tenant]
			if k == nil {
				k = map[string]*keyDemands{}
				byKey[tenant] = k
			}
			for key, v := range keys {
				if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
					v = 0 // a broken report counts as no demand
				}
				kd := k[key]
				if kd == nil {
					kd = &keyDemands{}
					k[key] = kd
				}
				kd.all = append(kd.all, v)
				if broker == self {
					kd.mine = v
				}
			}
		}
	}
	out := make(map[string]map[string]float64, len(byKey))
	for tenant, keys := range byKey {
		s := make(map[string]float64, len(keys))
		for key, kd := range keys {
			whole := math.Inf(1)
			if limit != nil {
				if l, ok := limit(tenant, key); ok && l > 0 {
					whole = l
				}
			}
			share, ok := maxMinShare(kd.mine, kd.all, whole)
			if !ok {
				s[key] = DefaultShare(live)
				continue
			}
			s[key] = math.Min(1, math.Max(share, floor))
		}
		out[tenant] = s
	}
	return out
}

// maxMinShare is the fraction of whole that demand mine gets when whole
// is split max-min fairly over the demands all (mine among them): all of
// it in proportion when they ask for no more than whole (or whole is
// unbounded), else each min(demand, L) with the water level L such that
// the parts sum to whole. ok is false when nobody has demand.
func maxMinShare(mine float64, all []float64, whole float64) (share float64, ok bool) {
	var total float64
	for _, v := range all {
		total += v
	}
	if total <= 0 {
		return 0, false
	}
	if total <= whole || math.IsInf(whole, 1) {
		return mine / total, true
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	left, level := whole, 0.0
	for i, v := range sorted {
		rest := float64(len(sorted) - i)
		if v*rest >= left { // every demand from here on asks at least an equal part of what is left
			level = left / rest
			break
		}
		left -= v
	}
	return math.Min(mine, level) / whole, true
}

// DefaultShare is the share of a key nobody has demand of: an equal split.
func DefaultShare(live int) float64 { return 1 / float64(max(live, 1)) }
