package runner

// soak.go owns the mixes: "soak" runs every fault family on one cluster
// that has all the optional parts (peer mesh, S3 proxies, its own etcd
// behind proxies, tmpfs data dirs), picking a family at random (seeded) for
// each injection. `make chaos-soak` runs it for long with a seed of the
// caller's.
//
// Invariant: a mix only picks families whose needs its cluster has.

import (
	"context"
	"sort"
	"time"
)

// soakName is the mix of every family.
const soakName = "soak"

// lookup returns the scenario called name: a family, or the soak.
func lookup(name string) (scenario, bool) {
	if name == soakName {
		return mix(familyNames(), needs{mesh: true, s3: true, s3faults: true, etcd: true, disk: true, tenants: true}), true
	}
	sc, ok := families[name]
	return sc, ok
}

// familyNames lists the fault families in name order.
func familyNames() []string {
	var out []string
	for name := range families {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// mix is a scenario that injects, at each tick, one fault of a family drawn
// from names among those n provides for.
func mix(names []string, n needs) scenario {
	return scenario{
		doc:   "every fault family, one drawn at random for each injection",
		needs: n,
		run: func(ctx context.Context, e *faultEnv, d time.Duration) error {
			var pool []string
			for _, name := range names {
				if families[name].needs.within(e.has) {
					pool = append(pool, name)
				}
			}
			return e.every(ctx, d, func(ctx context.Context) error {
				return families[pool[e.rng.IntN(len(pool))]].fault(e, ctx)
			})
		},
	}
}

// within reports whether every part n asks for is in have.
func (n needs) within(have needs) bool {
	return (!n.mesh || have.mesh) && (!n.s3 || have.s3) && (!n.s3faults || have.s3faults) &&
		(!n.etcd || have.etcd) && (!n.disk || have.disk) && (!n.tenants || have.tenants)
}

// Scenarios lists the scenario names: every family and the soak.
func Scenarios() []string { return append(familyNames(), soakName) }
