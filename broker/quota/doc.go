// Package quota is the vocabulary and the pure cores of per-tenant limits
// in a shared cluster: the quota keys (Kafka's names where Kafka has one),
// their units and validation, and the limiters the brokers' admit stages
// use. It does no I/O: the limits come from etcd through meta, the clocks
// are injected, and the Kafka and HTTP pipelines turn its answers into
// throttle times, error codes and status codes.
//
// A quota belongs to a tenant and is cluster-wide: a rate of 10 MB/s is
// what the whole cluster accepts from the tenant, not each broker. Each
// rate is metered by a Bucket (limiter.go), a token bucket with debt, held
// per tenant and key by the broker's Meters (limiter_meters.go) at the
// broker's share of the quota; how a broker learns its share, and how far
// the cluster's rate may stray from the quota, is described in split.go.
//
//	kind     keys                                           enforced as
//	rate     producer_byte_rate, consumer_byte_rate,        throttle (KIP-219):
//	         producer_record_rate, request_percentage,      answer at once with
//	         connection_creation_rate,                      throttle_time_ms, then
//	         object_upload_byte_rate                        stop reading the
//	                                                        connection
//	rate     controller_mutation_rate                       THROTTLING_QUOTA_EXCEEDED
//	count    partitions, topics, groups, connections,       POLICY_VIOLATION /
//	         inflight_requests                              HTTP 403
//	count    object_downloads (at once, per broker;         HTTP 429 "throttled",
//	         GET /v1/objects/{ref})                         Retry-After 1
//	storage  storage_bytes (produce; large-object uploads), retriable refusal /
//	         object_storage_bytes (large-object uploads,    HTTP 507
//	         broker/largeobj/quota.go)
//
// A key that is absent is unlimited.
//
// Where the limits come from: each tenant's limits, its weight in fair
// scheduling and its priority class are one record in etcd
// (meta.SetQuotas, <prefix>quotas/<tenant>). Every broker follows them
// (broker/quotas.go) into a Table, an atomically swapped snapshot that is
// the broker's Source (Broker.Quotas); a change applies on every broker
// within about a second. The package imports neither meta nor etcd.
package quota
