package controller

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// cluster builds brokers with ids 1, 2, … from AZ names, one per broker.
func brokersIn(azs ...string) []Broker {
	bs := make([]Broker, len(azs))
	for i, az := range azs {
		bs[i] = Broker{ID: NodeID(i + 1), AZ: az}
	}
	return bs
}

// counts tallies an assignment per broker.
func counts(assignment [][]NodeID) Load {
	l := Load{}
	l.Add(assignment)
	return l
}

// checkValid fails unless every partition has rf replicas on distinct
// offered brokers in distinct AZs.
func checkValid(t *testing.T, brokers []Broker, assignment [][]NodeID, partitions, rf int) {
	t.Helper()
	azOf := make(map[NodeID]string, len(brokers))
	for _, b := range brokers {
		azOf[b.ID] = b.AZ
	}
	if len(assignment) != partitions {
		t.Fatalf("got %d partitions, want %d", len(assignment), partitions)
	}
	for p, replicas := range assignment {
		if len(replicas) != rf {
			t.Fatalf("partition %d: %d replicas %v, want %d", p, len(replicas), replicas, rf)
		}
		seenBroker := map[NodeID]bool{}
		seenAZ := map[string]bool{}
		for _, id := range replicas {
			az, ok := azOf[id]
			if !ok {
				t.Fatalf("partition %d: replica on unknown broker %d", p, id)
			}
			if seenBroker[id] || seenAZ[az] {
				t.Fatalf("partition %d: replicas %v repeat broker %d or AZ %q", p, replicas, id, az)
			}
			seenBroker[id], seenAZ[az] = true, true
		}
	}
}

func TestDefaultReplicationFactor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []Broker
		want    int
	}{
		{"no brokers", nil, 0},
		{"lone broker", brokersIn("a"), 1},
		{"one AZ of three brokers", brokersIn("a", "a", "a"), 1},
		{"brokers without --az share one AZ", brokersIn("", "", ""), 1},
		{"two AZs", brokersIn("a", "b", "a", "b"), 2},
		{"three AZs one broker each", brokersIn("a", "b", "c"), 3},
		{"three AZs uneven", brokersIn("a", "a", "a", "b", "c"), 3},
		{"four AZs", brokersIn("a", "b", "c", "d"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultReplicationFactor(tc.brokers); got != tc.want {
				t.Fatalf("DefaultReplicationFactor = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		brokers    []Broker
		partitions int
		rf         int
		load       Load
		want       [][]NodeID // exact assignment, when given
		wantCounts Load       // replicas and leaders per broker of the new topic, when given
	}{
		{
			name:    "lone broker",
			brokers: brokersIn("a"), partitions: 3, rf: 1,
			want: [][]NodeID{{1}, {1}, {1}},
		},
		{
			name:    "3 AZs x 1 broker, rf 3",
			brokers: brokersIn("a", "b", "c"), partitions: 3, rf: 3,
			want: [][]NodeID{{1, 2, 3}, {2, 1, 3}, {3, 1, 2}},
		},
		{
			name:    "3 AZs x 2 brokers, rf 3",
			brokers: brokersIn("a", "b", "c", "a", "b", "c"), partitions: 12, rf: 3,
			wantCounts: Load{
				1: {6, 2}, 2: {6, 2}, 3: {6, 2}, 4: {6, 2}, 5: {6, 2}, 6: {6, 2},
			},
		},
		{
			name:    "uneven AZs a:3 b:1 c:1, rf 3",
			brokers: brokersIn("a", "a", "a", "b", "c"), partitions: 10, rf: 3,
			// b and c hold every partition, a's brokers a third each
			// (10 = 4+3+3); leaders are even over all five brokers.
			wantCounts: Load{
				1: {4, 2}, 2: {3, 2}, 3: {3, 2}, 4: {10, 2}, 5: {10, 2},
			},
		},
		{
			name:    "rf 2 of 3 AZs",
			brokers: brokersIn("a", "b", "c"), partitions: 3, rf: 2,
			wantCounts: Load{1: {2, 1}, 2: {2, 1}, 3: {2, 1}},
		},
		{
			name:    "more partitions than brokers wrap evenly",
			brokers: brokersIn("a", "b", "c"), partitions: 7, rf: 3,
			wantCounts: Load{1: {7, 3}, 2: {7, 2}, 3: {7, 2}},
		},
		{
			name:    "existing load: leaders go to the least-led brokers first",
			brokers: brokersIn("a", "b", "c"), partitions: 2, rf: 1,
			load: Load{1: {5, 5}, 2: {1, 1}},
			want: [][]NodeID{{3}, {2}}, // 3 first (no leaders), then 2 and 3 tie at one
		},
		{
			name:    "load for a broker that is gone is ignored",
			brokers: brokersIn("a", "b", "c"), partitions: 3, rf: 3,
			load: Load{9: {100, 100}},
			want: [][]NodeID{{1, 2, 3}, {2, 1, 3}, {3, 1, 2}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.brokers, tc.partitions, tc.rf, tc.load)
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			checkValid(t, tc.brokers, got, tc.partitions, tc.rf)
			if tc.want != nil && !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("Place = %v, want %v", got, tc.want)
			}
			if tc.wantCounts != nil {
				if c := counts(got); !maps.Equal(c, tc.wantCounts) {
					t.Fatalf("per-broker counts = %v, want %v (assignment %v)", c, tc.wantCounts, got)
				}
			}
		})
	}
}

func TestPlaceErrors(t *testing.T) {
	sixIn3 := brokersIn("a", "b", "c", "a", "b", "c")
	for _, tc := range []struct {
		name       string
		brokers    []Broker
		partitions int
		rf         int
		want       error
		wantMsg    []string // substrings of the message
	}{
		{"rf above AZs", sixIn3, 1, 4, ErrInvalidReplicationFactor,
			[]string{"4 replicas asked", "3 AZs over 6 live brokers", "1 to 3"}},
		{"rf 3 on a lone broker", brokersIn("a"), 1, 3, ErrInvalidReplicationFactor,
			[]string{"3 replicas asked", "1 AZs over 1 live brokers"}},
		{"rf 2 in one AZ of three brokers", brokersIn("a", "a", "a"), 1, 2, ErrInvalidReplicationFactor,
			[]string{"1 AZs over 3 live brokers"}},
		{"rf 0", sixIn3, 1, 0, ErrInvalidReplicationFactor, []string{"0 replicas asked"}},
		{"rf negative", sixIn3, 1, -1, ErrInvalidReplicationFactor, nil},
		{"no partitions", sixIn3, 0, 3, ErrInvalidPartitions, []string{"0 partitions"}},
		{"negative partitions", sixIn3, -2, 3, ErrInvalidPartitions, nil},
		{"no brokers", nil, 1, 1, ErrNoBrokers, nil},
		{"duplicate broker", []Broker{{ID: 1, AZ: "a"}, {ID: 2, AZ: "b"}, {ID: 1, AZ: "c"}}, 1, 1, ErrDuplicateBroker, []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.brokers, tc.partitions, tc.rf, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Place = %v, %v; want %v", got, err, tc.want)
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestAddPartitions(t *testing.T) {
	sixIn3 := brokersIn("a", "b", "c", "a", "b", "c")
	first, err := Place(sixIn3, 4, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		brokers  []Broker
		existing [][]NodeID
		count    int
		want     error
		wantMsg  string
	}{
		{"extends a topic", sixIn3, first, 8, nil, ""},
		{"an AZ gone leaves too few for rf", brokersIn("a", "b", "a", "b"), first, 1,
			ErrInvalidReplicationFactor, "3 replicas asked, but replicas must be in distinct AZs and the cluster has 2 AZs over 4 live brokers"},
		{"no existing partitions", sixIn3, nil, 1, ErrInvalidPartitions, "no partitions"},
		{"ragged existing", sixIn3, [][]NodeID{{1, 2, 3}, {4, 5}}, 1, ErrInvalidPartitions, "partition 1 has 2 replicas"},
		{"nothing to add", sixIn3, first, 0, ErrInvalidPartitions, "adding 0 partitions"},
		{"no brokers", nil, first, 1, ErrNoBrokers, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AddPartitions(tc.brokers, tc.existing, tc.count, counts(tc.existing))
			if !errors.Is(err, tc.want) {
				t.Fatalf("AddPartitions = %v, %v; want %v", got, err, tc.want)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("message %q lacks %q", err, tc.wantMsg)
				}
				return
			}
			checkValid(t, tc.brokers, got, tc.count, len(tc.existing[0]))
		})
	}
}

// Placing P partitions in one call, or P1 and then P-P1 more with the first
// part counted in the load, gives the same assignment: the greedy state is
// exactly the load plus what was placed.
func TestAddPartitionsContinuesPlace(t *testing.T) {
	brokers := brokersIn("a", "b", "c", "a", "b", "c", "a")
	other := Load{2: {3, 1}, 6: {1, 1}}
	whole, err := Place(brokers, 20, 3, other)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Place(brokers, 7, 3, other)
	if err != nil {
		t.Fatal(err)
	}
	load := maps.Clone(other)
	load.Add(first)
	rest, err := AddPartitions(brokers, first, 13, load)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !slices.EqualFunc(got, whole, slices.Equal) {
		t.Fatalf("in two steps %v, in one %v", got, whole)
	}
}

// Many one-partition topics, each counted in the load before the next, spread
// their leaders over every broker instead of piling them on the lowest id.
func TestSmallTopicsSpreadLeaders(t *testing.T) {
	brokers := brokersIn("a", "b", "c", "a", "b", "c")
	load := Load{}
	for range 30 {
		a, err := Place(brokers, 1, 3, load)
		if err != nil {
			t.Fatal(err)
		}
		load.Add(a)
	}
	for _, b := range brokers {
		if got := load[b.ID]; got != (BrokerLoad{Replicas: 15, Leaders: 5}) {
			t.Errorf("broker %d holds %+v, want 15 replicas and 5 leaders (all: %v)", b.ID, got, load)
		}
	}
}

func TestLoadAdd(t *testing.T) {
	l := Load{1: {Replicas: 2, Leaders: 1}}
	l.Add([][]NodeID{{1, 2, 3}, {2, 3, 1}, {3}})
	want := Load{1: {4, 2}, 2: {2, 1}, 3: {3, 1}}
	if !maps.Equal(l, want) {
		t.Fatalf("Load = %v, want %v", l, want)
	}
}

// randomCluster draws 1-9 brokers over 1-4 AZs (every AZ has a broker), with
// ids in a shuffled order and gaps.
func randomCluster(rng *rand.Rand) []Broker {
	n := 1 + rng.IntN(9)
	azs := 1 + rng.IntN(min(4, n))
	bs := make([]Broker, n)
	for i := range bs {
		az := i % azs
		if i >= azs {
			az = rng.IntN(azs)
		}
		bs[i] = Broker{ID: NodeID(10*(i+1) + rng.IntN(10)), AZ: fmt.Sprintf("az-%d", az)}
	}
	rng.Shuffle(n, func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	return bs
}

// spread is max-min of f over the brokers that keep says.
func spread(brokers []Broker, l Load, f func(BrokerLoad) int, keep func(Broker) bool) int {
	lo, hi, any := 0, 0, false
	for _, b := range brokers {
		if !keep(b) {
			continue
		}
		v := f(l[b.ID])
		if !any || v < lo {
			lo = v
		}
		if !any || v > hi {
			hi = v
		}
		any = true
	}
	return hi - lo
}

func replicasOf(b BrokerLoad) int { return b.Replicas }
func leadersOf(b BrokerLoad) int  { return b.Leaders }
func everyBroker(Broker) bool     { return true }

// TestPlaceProperties checks the guarantees of doc.go over seeded random
// clusters with an empty load.
func TestPlaceProperties(t *testing.T) {
	const seed = 9
	rng := rand.New(rand.NewPCG(seed, seed))
	for iter := range 20000 {
		brokers := randomCluster(rng)
		azSize := map[string]int{}
		for _, b := range brokers {
			azSize[b.AZ]++
		}
		azs := len(azSize)
		rf := 1 + rng.IntN(azs)
		partitions := 1 + rng.IntN(64)
		equalAZs := len(brokers)%azs == 0 && !slices.ContainsFunc(brokers, func(b Broker) bool {
			return azSize[b.AZ] != len(brokers)/azs
		})
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d iteration %d: Place(%v, %d, %d, nil): %s", seed, iter, brokers, partitions, rf, fmt.Sprintf(format, args...))
		}

		got, err := Place(brokers, partitions, rf, nil)
		if err != nil {
			fail("%v", err)
		}
		checkValid(t, brokers, got, partitions, rf)

		// Deterministic, and blind to the order the brokers come in.
		shuffled := slices.Clone(brokers)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again, err := Place(shuffled, partitions, rf, Load{})
		if err != nil || !slices.EqualFunc(got, again, slices.Equal) {
			fail("not deterministic: %v, then %v (%v)", got, again, err)
		}

		c := counts(got)
		if s := spread(brokers, c, leadersOf, everyBroker); s > 1 {
			fail("leader counts differ by %d: %v", s, c)
		}
		for az := range azSize {
			inAZ := func(b Broker) bool { return b.AZ == az }
			if s := spread(brokers, c, replicasOf, inAZ); s > 1 {
				fail("replica counts in AZ %s differ by %d: %v", az, s, c)
			}
			if rf == azs {
				total := 0
				for _, b := range brokers {
					if inAZ(b) {
						total += c[b.ID].Replicas
					}
				}
				if total != partitions {
					fail("AZ %s holds %d replicas of %d partitions at full rf", az, total, partitions)
				}
			}
		}
		if equalAZs {
			bound := 1
			if rf < azs {
				bound = 2
			}
			if s := spread(brokers, c, replicasOf, everyBroker); s > bound {
				fail("equal AZs: replica counts differ by %d > %d: %v", s, bound, c)
			}
		}
	}
}

// TestPlaceWithLoadProperties checks the water-filling of leaders over a
// random pre-existing load: a new leadership only goes to a broker at the
// minimum, so each broker that got one ends at most 1 above the final
// minimum, and the spread of leader counts never grows beyond max(1, before).
func TestPlaceWithLoadProperties(t *testing.T) {
	const seed = 10
	rng := rand.New(rand.NewPCG(seed, seed))
	for iter := range 10000 {
		brokers := randomCluster(rng)
		azs := countAZs(brokers)
		rf := 1 + rng.IntN(azs)
		partitions := 1 + rng.IntN(64)
		before := Load{}
		for _, b := range brokers {
			if rng.IntN(4) > 0 {
				leaders := rng.IntN(20)
				before[b.ID] = BrokerLoad{Replicas: leaders + rng.IntN(40), Leaders: leaders}
			}
		}
		frozen := maps.Clone(before)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d iteration %d: Place(%v, %d, %d, %v): %s", seed, iter, brokers, partitions, rf, frozen, fmt.Sprintf(format, args...))
		}

		got, err := Place(brokers, partitions, rf, before)
		if err != nil {
			fail("%v", err)
		}
		checkValid(t, brokers, got, partitions, rf)
		if !maps.Equal(before, frozen) {
			fail("Place changed the load it was given: %v", before)
		}
		again, _ := Place(brokers, partitions, rf, frozen)
		if !slices.EqualFunc(got, again, slices.Equal) {
			fail("not deterministic: %v, then %v", got, again)
		}

		added := counts(got)
		after := maps.Clone(before)
		after.Add(got)
		minAfter := -1
		for _, b := range brokers {
			if v := after[b.ID].Leaders; minAfter < 0 || v < minAfter {
				minAfter = v
			}
		}
		for _, b := range brokers {
			if added[b.ID].Leaders > 0 && after[b.ID].Leaders > minAfter+1 {
				fail("broker %d got %d new leaders and ends at %d, but the least-led broker has %d",
					b.ID, added[b.ID].Leaders, after[b.ID].Leaders, minAfter)
			}
		}
		was := spread(brokers, before, leadersOf, everyBroker)
		if now := spread(brokers, after, leadersOf, everyBroker); now > max(1, was) {
			fail("leader spread grew from %d to %d", was, now)
		}
	}
}

// FuzzPlace draws a cluster and a request from bytes: Place either fails with
// one of its markers or returns a valid assignment; it never panics.
func FuzzPlace(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 2}, uint8(6), uint8(3))
	f.Add([]byte{0, 0, 0, 1, 2}, uint8(10), uint8(3))
	f.Add([]byte{0}, uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, azOfBroker []byte, partitions, rf uint8) {
		if len(azOfBroker) > 16 {
			azOfBroker = azOfBroker[:16]
		}
		brokers := make([]Broker, len(azOfBroker))
		for i, az := range azOfBroker {
			brokers[i] = Broker{ID: NodeID(len(azOfBroker) - i), AZ: fmt.Sprint(az % 8)}
		}
		got, err := Place(brokers, int(partitions), int(rf), nil)
		if err != nil {
			for _, marker := range []error{ErrNoBrokers, ErrInvalidPartitions, ErrInvalidReplicationFactor} {
				if errors.Is(err, marker) {
					return
				}
			}
			t.Fatalf("unclassified error %v", err)
		}
		checkValid(t, brokers, got, int(partitions), int(rf))
		if s := spread(brokers, counts(got), leadersOf, everyBroker); s > 1 {
			t.Fatalf("leader counts differ by %d", s)
		}
	})
}
