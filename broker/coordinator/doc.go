// Package coordinator runs the consumer groups this broker coordinates:
// each group's pure state machine (broker/group) driven under a claim in
// etcd, committed offsets written through that claim, placement of groups
// on the live brokers, and the admin views (describe, list, delete,
// reset). It reaches the rest of the broker through the Cluster
// interface.
package coordinator
