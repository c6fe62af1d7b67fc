// Package console is the operator's web console at /ui: server-rendered
// HTML pages (html/template) and their assets, embedded in the binary
// (embed.FS) so every broker serves them with no CDN or network at run
// time, and a vendored chart library (uPlot, assets/uplot with its
// licence) for the lag charts.
//
// Pages (GET, read-only; the redrive forms POST, redrive.go):
//
//	/ui/                         the cluster: brokers (AZ, pool, liveness,
//	                             controller), each live one with its etcd
//	                             round trip, disk watermark level and WAL
//	                             fsync latency (p50, p99), or unreachable
//	/ui/topics                   topics; /ui/topics/{topic}: partitions
//	                             (leader, epoch, replicas, in-sync set, HW,
//	                             log start, local and remote bytes, upload
//	                             lag) and per-partition ingress with hot keys
//	/ui/groups                   groups; /ui/groups/{group}: members and
//	                             assignments, lag (offsets, bytes, oldest
//	                             age, catch-up time) and charts of the last hour
//	/ui/tier/{topic}/{partition} a partition's remote log: its head, objects,
//	                             manifests and retention plan; /ui/tier/orphans
//	                             (super users) the bucket diffed with every head
//	/ui/tenants                  tenants, quotas and their use, throttling
//	/ui/dlq                      dead-letter topics with their depth, their
//	                             redrive jobs and a redrive form each
//	/ui/redrives/{id}            a redrive's progress, with cancel
//	POST /ui/dlq/{dlq}/redrives, POST /ui/redrives/{id}/cancel
//	                             the forms (super users, tenant admins)
//	/ui/messages/{topic}         records of a partition by offset or time, as
//	                             text, JSON or hex, large-payload references
//	                             with their download link
//	/ui/assets/...               the embedded CSS, script and uPlot
//
// Where the data comes from: a page asks the broker's own JSON API in
// process (no socket), through the API's request pipeline, with the
// caller's own credentials. So the console shows exactly what GET
// /v1/topics, /v1/groups/{group}/lag and the other listings answer, and
// the pipeline's authentication, tenant scope and ACLs apply unchanged: a
// principal that is not a super user sees its own tenant's names only, and
// what its ACLs let it describe. Only the tier pages and the tenants' use
// read the node directly (the remote head in etcd, the object store, the
// metrics registry), after the same in-process API call has authorised
// the caller.
//
// The brokers' health on the cluster page is GET /v1/brokers/{id}/health
// (broker/httpapi/healthapi) for each live broker, asked concurrently: the
// serving broker answers for itself and asks each other broker over the
// inter-broker listener, where the figures are read on the broker they
// describe. One deadline (Config.HealthTimeout, 1 s) covers them all, so
// a broker that is stopped, hung or cut off while its registration still
// lives costs the page at most that long and is shown unreachable; a
// broker that is not live is not asked.
//
// The lag history (history.go) is sampled by one goroutine (sampler.go)
// that asks the lag listing as the broker itself (a super identity that
// never leaves the process) every Interval, so the charts work without
// Prometheus.
//
// The console's only write is redrive (redrive.go): a form's POST is
// checked (who may write, same origin, a token bound to the credentials)
// and then asked of the API as the caller, like every read.
package console
