// Package healthapi is one broker's own health as JSON: the figures an
// operator checks first when a broker misbehaves, read on the broker they
// describe.
//
//	GET /v1/brokers/{id}/health   authenticated (like GET /v1/brokers); any
//	                              broker answers for any live broker: for
//	                              itself from its own state, for another by
//	                              asking it over the inter-broker listener
//	                              (GET /internal/v1/health) within PeerTimeout
//	GET /internal/v1/health       on the inter-broker listener: this broker's
//
//	200 {"node": 2,
//	     "etcd":  {"ok": true, "round_trip_ms": 0.84}
//	            | {"ok": false, "error": "…"},
//	     "disk":  {"level": 0, "meaning": "none"},
//	     "fsync": {"count": 1234, "p50_seconds": 0.0016, "p99_seconds": 0.0128,
//	               "largest_bucket_seconds": 1.6384}}
//
//	400 bad_request       the id is not a number
//	503 peer_unreachable  the broker is not live, or did not answer within
//	                      PeerTimeout (it is stopped, hung or cut off)
//
// etcd's round trip is one read of the controller key, bounded by
// etcdTimeout so that a broker whose etcd is slow still answers within
// PeerTimeout (with ok false and why). The disk level is the disk-watermark
// ladder's (broker/node/diskladder.go): 0 none, 1 no new topics or
// partitions, 2 no bursts for low-priority tenants, 3 publishes over quota
// refused. The fsync quantiles are bounds read from the histogram
// sluice_wal_fsync_duration_seconds, exactly what /metrics exports: the
// upper bound of the bucket holding the quantile. They are null before
// the first fsync (count 0), and null with a count above 0 when the
// quantile lies beyond the largest bucket (over largest_bucket_seconds).
//
// Versioning: fields are only ever added; a reader ignores those it does
// not know.
package healthapi
