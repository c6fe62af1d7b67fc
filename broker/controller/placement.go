package controller

// This file owns replica placement: which brokers hold the replicas of a new
// topic's partitions (or of partitions added to a topic), and which of them is
// each partition's preferred leader. It is a pure function of its arguments:
// no I/O, no clock, no randomness, no map iteration.
//
// Invariant: the replicas of one partition are on distinct brokers in
// distinct AZs, so the loss of one AZ loses at most one replica.
// Invariant: each preferred leader is given to a broker whose leader count
// (existing load plus leaders placed so far) is the minimum over all brokers;
// for a tenant's placement (pools.go), whose count of that tenant's leaders
// is the minimum over the brokers of its pool, the overall count breaking ties.
// Invariant: each follower is given to a broker whose replica count is the
// minimum over the brokers of the AZs the partition does not use yet.
// Invariant: the same brokers (in any order), counts and load give the same
// assignment.
//
// No state outlives a call; nothing to guard.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// NodeID is a broker's node id, as in Kafka's broker id and Sluice's --node-id.
type NodeID int32

// Broker is a live broker as placement sees it.
type Broker struct {
	ID   NodeID
	AZ   string // the broker's --az; brokers with the same string share an AZ, "" included
	Pool string // the broker's --pool; "" is DefaultPool. Only pools.go reads it
}

// BrokerLoad is what one broker already holds.
type BrokerLoad struct {
	Replicas int // partition replicas, leaders included
	Leaders  int // preferred leaderships
}

// Load is the replicas and preferred leaderships each broker already holds
// for other topics (and, for AddPartitions, for the topic itself). Brokers
// missing from it hold nothing; entries for brokers not offered to Place are
// ignored. A nil Load is an empty one.
type Load map[NodeID]BrokerLoad

// Add counts an assignment (replica lists, preferred leader first) into l.
// The controller builds the load of a cluster by adding every topic's
// assignment, and adds each new one before placing the next topic.
func (l Load) Add(assignment [][]NodeID) {
	for _, replicas := range assignment {
		for i, id := range replicas {
			bl := l[id]
			bl.Replicas++
			if i == 0 {
				bl.Leaders++
			}
			l[id] = bl
		}
	}
}

var (
	// ErrNoBrokers: there is no live broker to place on.
	ErrNoBrokers = errors.New("no live brokers")
	// ErrInvalidReplicationFactor: the replication factor is below 1 or above
	// the number of distinct AZs (Kafka's INVALID_REPLICATION_FACTOR).
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	// ErrInvalidPartitions: the partition count is below 1, or the existing
	// assignment given to AddPartitions is malformed (Kafka's INVALID_PARTITIONS).
	ErrInvalidPartitions = errors.New("invalid partitions")
	// ErrDuplicateBroker: the same node id was offered twice.
	ErrDuplicateBroker = errors.New("duplicate broker id")
)

// DefaultReplicationFactor is the replication factor of a topic created
// without one: 3 when the brokers span at least three AZs, otherwise the
// number of distinct AZs (1 on a lone broker or a single AZ, 2 across two AZs),
// and 0 when there are no brokers. doc.go says why.
func DefaultReplicationFactor(brokers []Broker) int {
	return min(3, countAZs(brokers))
}

// Place assigns the replicas of partitions new partitions with
// replicationFactor replicas each. It returns one replica list per partition,
// preferred leader first. See doc.go for the evenness it guarantees.
func Place(brokers []Broker, partitions, replicationFactor int, load Load) ([][]NodeID, error) {
	c, err := newCluster(brokers, load)
	if err != nil {
		return nil, fmt.Errorf("controller: place: %w", err)
	}
	if partitions < 1 {
		return nil, fmt.Errorf("controller: place: %w: %d partitions, need at least 1", ErrInvalidPartitions, partitions)
	}
	if err := c.checkReplicationFactor(replicationFactor); err != nil {
		return nil, fmt.Errorf("controller: place: %w", err)
	}
	return c.place(partitions, replicationFactor), nil
}

// existingRF is the replication factor of a topic's current assignment,
// checked to be the same in every partition.
func existingRF(existing [][]NodeID) (int, error) {
	if len(existing) == 0 {
		return 0, fmt.Errorf("%w: the topic has no partitions to extend", ErrInvalidPartitions)
	}
	rf := len(existing[0])
	for p, replicas := range existing {
		if len(replicas) != rf {
			return 0, fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d",
				ErrInvalidPartitions, p, len(replicas), rf)
		}
	}
	return rf, nil
}

// AddPartitions places count more partitions of a topic whose current
// assignment is existing (as CreatePartitions does), with the topic's
// replication factor and the same rules as Place. load should already count
// existing along with the other topics. It returns the new partitions only.
// Existing replicas on brokers that are gone are not an error: only the new
// partitions are placed, on the brokers offered.
func AddPartitions(brokers []Broker, existing [][]NodeID, count int, load Load) ([][]NodeID, error) {
	rf, err := existingRF(existing)
	if err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	c, err := newCluster(brokers, load)
	if err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	if count < 1 {
		return nil, fmt.Errorf("controller: add partitions: %w: adding %d partitions, need at least 1", ErrInvalidPartitions, count)
	}
	if err := c.checkReplicationFactor(rf); err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	return c.place(count, rf), nil
}

// cluster is the working state of one call: brokers sorted by id, each with
// an AZ index and the counts placement balances.
type cluster struct {
	ids      []NodeID
	az       []int    // az[i] indexes the distinct AZs in order of first appearance by id
	azs      int      // number of distinct AZs
	azNames  []string // azNames[az[i]] is broker i's AZ
	replicas []int
	leaders  []int
	// tenant is the leaderships of the tenant being placed, per broker,
	// when the placement is a tenant's (pools.go); nil otherwise.
	tenant []int
	pool   string // the tenant's pool, for messages; "" when not a tenant's placement
}

func newCluster(brokers []Broker, load Load) (*cluster, error) {
	if len(brokers) == 0 {
		return nil, ErrNoBrokers
	}
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	c := &cluster{
		ids:      make([]NodeID, len(sorted)),
		az:       make([]int, len(sorted)),
		replicas: make([]int, len(sorted)),
		leaders:  make([]int, len(sorted)),
	}
	azIndex := make(map[string]int)
	for i, b := range sorted {
		if i > 0 && sorted[i-1].ID == b.ID {
			return nil, fmt.Errorf("%w: %d", ErrDuplicateBroker, b.ID)
		}
		idx, ok := azIndex[b.AZ]
		if !ok {
			idx = len(azIndex)
			azIndex[b.AZ] = idx
			c.azNames = append(c.azNames, b.AZ)
		}
		c.ids[i] = b.ID
		c.az[i] = idx
		c.replicas[i] = load[b.ID].Replicas
		c.leaders[i] = load[b.ID].Leaders
	}
	c.azs = len(azIndex)
	return c, nil
}

func (c *cluster) checkReplicationFactor(rf int) error {
	if c.pool != "" && (rf < 1 || rf > c.azs) {
		return fmt.Errorf("%w: %d replicas asked, but replicas must be in distinct AZs and pool %q has %d AZs (%s) over %d live brokers (allowed 1 to %d)",
			ErrInvalidReplicationFactor, rf, c.pool, c.azs, quoteAZs(c.azNames), len(c.ids), c.azs)
	}
	if rf < 1 || rf > c.azs {
		return fmt.Errorf("%w: %d replicas asked, but replicas must be in distinct AZs and the cluster has %d AZs over %d live brokers (allowed 1 to %d)",
			ErrInvalidReplicationFactor, rf, c.azs, len(c.ids), c.azs)
	}
	return nil
}

// place assumes 1 <= rf <= c.azs and partitions >= 1.
func (c *cluster) place(partitions, rf int) [][]NodeID {
	out := make([][]NodeID, partitions)
	usedAZ := make([]bool, c.azs)
	for p := range out {
		clear(usedAZ)
		replicas := make([]NodeID, 0, rf)

		// The preferred leader: fewest leaderships of the tenant (for a
		// tenant's placement), then fewest leaderships anywhere, then
		// fewest replicas, then lowest id. Any broker qualifies, since
		// rf <= azs leaves enough other AZs for the followers.
		leader := 0
		for i := 1; i < len(c.ids); i++ {
			if c.tenant != nil && c.tenant[i] != c.tenant[leader] {
				if c.tenant[i] < c.tenant[leader] {
					leader = i
				}
				continue
			}
			if c.leaders[i] < c.leaders[leader] ||
				c.leaders[i] == c.leaders[leader] && c.replicas[i] < c.replicas[leader] {
				leader = i
			}
		}
		if c.tenant != nil {
			c.tenant[leader]++
		}
		c.leaders[leader]++
		c.replicas[leader]++
		usedAZ[c.az[leader]] = true
		replicas = append(replicas, c.ids[leader])

		// Followers: fewest replicas among the AZs not used yet, then most
		// leaderships (those with few will gain a replica by leading soon),
		// then lowest id.
		for len(replicas) < rf {
			f := -1
			for i := range c.ids {
				if usedAZ[c.az[i]] {
					continue
				}
				if f < 0 || c.replicas[i] < c.replicas[f] ||
					c.replicas[i] == c.replicas[f] && c.leaders[i] > c.leaders[f] {
					f = i
				}
			}
			if f < 0 {
				panic("controller: place: no AZ left for a follower with rf <= azs")
			}
			c.replicas[f]++
			usedAZ[c.az[f]] = true
			replicas = append(replicas, c.ids[f])
		}
		out[p] = replicas
	}
	return out
}

func countAZs(brokers []Broker) int {
	seen := make(map[string]struct{}, len(brokers))
	for _, b := range brokers {
		seen[b.AZ] = struct{}{}
	}
	return len(seen)
}
