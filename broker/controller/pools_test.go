package controller

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// pooled builds brokers with ids 1, 2, … from "pool/az" strings.
func pooled(specs ...string) []Broker {
	bs := make([]Broker, len(specs))
	for i, s := range specs {
		pool, az, _ := strings.Cut(s, "/")
		bs[i] = Broker{ID: NodeID(i + 1), AZ: az, Pool: pool}
	}
	return bs
}

func TestPlaceForTenantPools(t *testing.T) {
	// Brokers 1-3 have no pool (the shared pool), 4-6 are gold over three
	// AZs, 7-8 silver over two.
	brokers := pooled("/a", "/b", "/c", "gold/a", "gold/b", "gold/c", "silver/a", "silver/b")
	for _, tc := range []struct {
		name    string
		pool    string
		rf      int
		want    []NodeID // the brokers every replica must be on
		wantErr string   // substrings of the error, when one is wanted
	}{
		{name: "unbound tenant uses the shared pool", pool: "", rf: 3, want: []NodeID{1, 2, 3}},
		{name: "shared named", pool: "shared", rf: 3, want: []NodeID{1, 2, 3}},
		{name: "gold", pool: "gold", rf: 3, want: []NodeID{4, 5, 6}},
		{name: "silver rf 2", pool: "silver", rf: 2, want: []NodeID{7, 8}},
		{name: "silver has two AZs", pool: "silver", rf: 3,
			wantErr: `pool "silver" has 2 AZs ("a", "b") over 2 live brokers`},
		{name: "empty pool", pool: "bronze", rf: 1,
			wantErr: `pool "bronze" has no live brokers, so no AZs (live pools: "gold", "shared", "silver")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceForTenant(brokers, Tenant{Pool: tc.pool}, 12, tc.rf, nil)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidReplicationFactor) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalidReplicationFactor with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, InPool(brokers, tc.pool), got, 12, tc.rf)
			allowed := map[NodeID]bool{}
			for _, id := range tc.want {
				allowed[id] = true
			}
			for p, rs := range got {
				for _, id := range rs {
					if !allowed[id] {
						t.Fatalf("partition %d: replica on broker %d, outside pool %q %v", p, id, tc.pool, tc.want)
					}
				}
			}
			// Twelve partitions over the pool's brokers: leaders even.
			leaders := map[NodeID]int{}
			for _, rs := range got {
				leaders[rs[0]]++
			}
			for _, id := range tc.want {
				if leaders[id] != 12/len(tc.want) {
					t.Fatalf("leaders %v, want %d on each of %v", leaders, 12/len(tc.want), tc.want)
				}
			}
		})
	}
}

func TestAddTenantPartitionsPools(t *testing.T) {
	brokers := pooled("/a", "/b", "/c", "gold/a", "gold/b")
	// A topic placed before its tenant was bound to gold keeps its
	// partitions; the new ones go to gold, whose two AZs cannot hold three.
	existing := [][]NodeID{{1, 2, 3}}
	_, err := AddTenantPartitions(brokers, Tenant{Pool: "gold"}, existing, 1, counts(existing))
	if !errors.Is(err, ErrInvalidReplicationFactor) || !strings.Contains(err.Error(), `pool "gold" has 2 AZs ("a", "b")`) {
		t.Fatalf("rf 3 into a two-AZ pool: %v", err)
	}
	existing = [][]NodeID{{1, 2}}
	got, err := AddTenantPartitions(brokers, Tenant{Pool: "gold", Leaders: map[NodeID]int{1: 1}}, existing, 4, counts(existing))
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, InPool(brokers, "gold"), got, 4, 2)
	if _, err := AddTenantPartitions(brokers, Tenant{}, nil, 1, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("no existing partitions: %v", err)
	}
}

// TestTenantLeadersSpread creates many topics of one tenant, in between
// other tenants' topics that load the pool's brokers unevenly, and checks
// after each creation that the tenant's preferred leaders differ by at most
// one between any two brokers of its pool.
func TestTenantLeadersSpread(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []Broker
		pool    string
		rf      int
		skew    Load // what other tenants hold before the first topic
	}{
		{name: "three brokers, one idle", brokers: pooled("gold/a", "gold/b", "gold/c"), pool: "gold", rf: 3,
			skew: Load{2: {Replicas: 30, Leaders: 10}, 3: {Replicas: 30, Leaders: 10}}},
		{name: "six brokers in three AZs", brokers: pooled("gold/a", "gold/a", "gold/b", "gold/b", "gold/c", "gold/c"), pool: "gold", rf: 3,
			skew: Load{1: {Replicas: 40, Leaders: 20}, 4: {Leaders: 7}}},
		{name: "shared pool next to others", brokers: pooled("/a", "/b", "/c", "/a", "x/a", "x/b", "x/c"), pool: "", rf: 2,
			skew: Load{4: {Replicas: 9, Leaders: 9}}},
		{name: "rf 1 over four brokers of one AZ", brokers: pooled("p/z", "p/z", "p/z", "p/z"), pool: "p", rf: 1,
			skew: Load{1: {Leaders: 5}, 2: {Leaders: 5}, 3: {Leaders: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			load := Load{}
			for id, bl := range tc.skew {
				load[id] = bl
			}
			mine := map[NodeID]int{}
			in := InPool(tc.brokers, tc.pool)
			for topic := range 40 {
				// Another tenant's topic, unaware of ours, now and then.
				if topic%3 == 0 {
					other, err := PlaceForTenant(tc.brokers, Tenant{Pool: tc.pool}, 1+rng.IntN(3), tc.rf, load)
					if err != nil {
						t.Fatal(err)
					}
					load.Add(other)
				}
				parts := 1 + rng.IntN(4)
				got, err := PlaceForTenant(tc.brokers, Tenant{Pool: tc.pool, Leaders: mine}, parts, tc.rf, load)
				if err != nil {
					t.Fatal(err)
				}
				checkValid(t, in, got, parts, tc.rf)
				load.Add(got)
				for _, rs := range got {
					mine[rs[0]]++
				}
				lo, hi := 1<<30, -1
				for _, b := range in {
					lo, hi = min(lo, mine[b.ID]), max(hi, mine[b.ID])
				}
				if hi-lo > 1 {
					t.Fatalf("after topic %d: the tenant's leaders per broker %v spread %d, want at most 1", topic, fmt.Sprint(mine), hi-lo)
				}
			}
		})
	}
}

// TestPlaceIgnoresPools pins that Place and AddPartitions, which place
// without a tenant, still offer every broker whatever its pool.
func TestPlaceIgnoresPools(t *testing.T) {
	brokers := pooled("gold/a", "/b", "silver/c")
	got, err := Place(brokers, 3, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, brokers, got, 3, 3)
}
