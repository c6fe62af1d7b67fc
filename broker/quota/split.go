package quota

// This file owns the split of a tenant's cluster-wide rate quota among the
// brokers its traffic lands on.
//
// Every SplitPeriod each broker publishes what it measured of each
// tenant's keys in the last period (its demand: units per second, doubled
// for a key it held a client of, see below) under a key bound to its
// registration lease, reads every live broker's, and sets its local rate of
// the tenant's key to quota × share, where
//
//	share = max(mine / Σ demands, 1 / (2 × live brokers))   when Σ > 0
//	share = 1 / live brokers                                  when Σ = 0
//
// so a broker that is the only one with demand takes the whole quota, and
// one that sees new traffic starts from the floor rather than from nothing
// while its demand becomes known. A broker measures only what it let
// through, which at its limit is its share: so a broker that held a client
// publishes twice its rate, which is how it asks for more; brokers whose
// clients all want more than they get keep the split they have, and their
// sum is the quota.
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
// measures it.
//
// Invariant: every share is in (0, 1]; Shares is a pure function of the
// demands it is given.

import (
	"math"
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
// broker absent has none) and the number of live brokers (at least the
// brokers in demands). Tenant keys absent from the answer have no demand
// anywhere: their share is DefaultShare(live).
func Shares(self string, demands map[string]Demand, live int) map[string]map[string]float64 {
	live = max(live, len(demands), 1)
	floor := 1 / (2 * float64(live))
	totals := map[string]map[string]float64{}
	for _, d := range demands {
		for tenant, keys := range d {
			t := totals[tenant]
			if t == nil {
				t = map[string]float64{}
				totals[tenant] = t
			}
			for key, v := range keys {
				if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
					v = 0 // a broken report counts as no demand
				}
				t[key] += v
			}
		}
	}
	out := make(map[string]map[string]float64, len(totals))
	mine := demands[self]
	for tenant, keys := range totals {
		s := make(map[string]float64, len(keys))
		for key, total := range keys {
			if total <= 0 {
				s[key] = DefaultShare(live)
				continue
			}
			v := mine[tenant][key]
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				v = 0
			}
			s[key] = math.Min(1, math.Max(v/total, floor))
		}
		out[tenant] = s
	}
	return out
}

// DefaultShare is the share of a key nobody has demand of: an equal split.
func DefaultShare(live int) float64 { return 1 / float64(max(live, 1)) }
