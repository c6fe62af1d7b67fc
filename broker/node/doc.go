// Package node is one broker's own state, below every protocol front end:
// its configuration (Config), the data directory and its identity, the
// broker journal, the registry of topics and the partitions this broker
// hosts, tiering to object storage, the disk guard and its watermark
// ladder, the tenant limits it enforces (counts, the admin mutation rate,
// storage: limits.go, storage.go), metrics, the mapping
// of internal errors to Kafka codes, offsets by time and batch
// validation. It imports none of the packages above it (broker/kafka,
// broker/httpapi, broker/cluster, broker/coordinator); what it needs of
// them it calls through Hooks, set once before the broker runs.
package node
