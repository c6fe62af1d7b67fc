// Package controller holds the decisions the cluster controller makes
// (docs/architecture.md): today, replica placement, that is which live brokers hold
// the replicas of a topic's partitions and which replica is each partition's
// preferred leader. Election and fences will join it. It is a pure core: it
// imports nothing of this repository, does no I/O, starts no goroutine, reads
// no clock and draws no random number. The broker reads the live brokers and
// the current assignments from meta, calls Place or AddPartitions, and writes
// the result back; the error markers map to Kafka codes at the broker edge
// (ErrInvalidReplicationFactor → INVALID_REPLICATION_FACTOR,
// ErrInvalidPartitions → INVALID_PARTITIONS, ErrNoBrokers → BROKER_NOT_AVAILABLE).
//
// # Default replication factor
//
// DefaultReplicationFactor is min(3, distinct AZs): 3 across three or more
// AZs, 2 across two, 1 on a lone broker or when every broker is in one AZ,
// 0 with no brokers (Place then fails with ErrNoBrokers). Why:
//   - replicas must be in distinct AZs (the first guarantee: an
//     acknowledged record survives the loss of any one AZ), so a replication
//     factor above the AZ count cannot be placed, and three replicas in one AZ
//     would promise what they cannot keep;
//   - across two AZs, 2 keeps that invariant (the write quorum of 2 is both
//     replicas, so losing an AZ stops writes but loses nothing acknowledged),
//     where 1 would lose acknowledged data with the AZ. Availability through an
//     AZ loss needs a third AZ, as in Kafka with min.insync.replicas=2;
//   - it never exceeds the live brokers, which is what Kafka operators expect
//     (each AZ has at least one broker, so AZs <= brokers).
//
// A broker started without --az is in the AZ "": three such brokers are one
// AZ and get 1. Deployments of more than one broker set --az.
//
// # Placement rules
//
// Brokers are taken in node-id order; map iteration order and randomness play
// no part, so the same brokers, counts and Load give the same assignment.
// Partitions are placed one after another, each in two steps, counting the
// Load (what other topics already put on each broker) plus what this call has
// placed so far:
//
//  1. Preferred leader: the broker with the fewest leaderships; ties go to
//     the fewest replicas, then the lowest id. Any broker may lead: with
//     rf <= AZs there are always rf-1 other AZs for the followers.
//  2. Followers, until rf replicas: among brokers of AZs the partition does
//     not use yet, the one with the fewest replicas; ties go to the most
//     leaderships (a broker that has had its turn as leader will not gain a
//     replica by leading soon, one with few leaderships will), then the lowest
//     id.
//
// Variety between small topics comes from the Load, not from a random start:
// the caller adds each topic's assignment to the Load (Load.Add) before the
// next one, so one-partition topics take their leaders from broker after
// broker instead of all from the lowest id.
//
// # Pools and tenants
//
// The broker places every new partition for a tenant (PlaceForTenant,
// AddTenantPartitions, pools.go): only the brokers of the tenant's pool
// (Broker.Pool, "" meaning DefaultPool) are offered, with the rules above,
// except that step 1 first takes the broker with the fewest of that
// tenant's preferred leaderships (Tenant.Leaders plus those placed so
// far), the rules above breaking ties. So one tenant's leaders are
// water-filled over its pool's brokers even when other tenants have left
// the pool uneven, at the price of the cluster-wide leader evenness below,
// which then holds per tenant rather than overall. A pool with fewer AZs
// than the replication factor, or with no live broker, is
// ErrInvalidReplicationFactor with a message naming the pool and its AZs.
// Place and AddPartitions ignore pools and tenants.
//
// # Evenness
//
// Guaranteed (proved by the argument below, and checked by the tests):
//   - Every partition has rf replicas on rf distinct brokers in rf distinct AZs.
//   - Leaders are water-filled over all brokers, whatever the AZ shape: each
//     new leadership goes to a broker at the minimum leader count at that
//     moment. So with an empty Load the leader counts of the new topic differ
//     by at most 1 between any two brokers; with a Load, the spread of the
//     total counts (max-min) never grows beyond max(1, its value before), and
//     a broker that got a new leadership ends at most 1 above the final
//     minimum. Argument: the minimum never decreases, and a broker is given a
//     leadership only while it is at the minimum.
//   - When rf equals the AZ count, every AZ holds exactly one replica of each
//     partition.
//
// Checked by the seeded property test over tens of thousands of clusters of
// 1-9 brokers in 1-4 AZs, 1-64 partitions, with an empty Load, but not proved:
//   - Within any one AZ, replica counts differ by at most 1.
//   - With equal numbers of brokers in every AZ, replica counts over all
//     brokers differ by at most 1 when rf equals the AZ count, and by at most 2
//     when rf is smaller (the greedy follower choice can leave one AZ a replica
//     ahead of another).
//
// Not promised: with unequal AZs, replicas cannot be even over brokers (with
// AZs of 3, 1 and 1 brokers and rf 3, the lone brokers of the small AZs hold
// every partition, the three others a third each); only the within-AZ bound
// holds. With a Load built from other placements, or with topics of mixed
// replication factors, leaders stay water-filled but replicas are only as
// even as the greedy choice makes them: placement prefers leader evenness to
// replica evenness, and it never moves existing replicas (no rebalancing).
package controller
