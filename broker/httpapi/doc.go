// Package httpapi is the broker's HTTP front end: the JSON API and its
// OpenAPI description, health and readiness, metrics and profiles, behind
// one request pipeline (pipeline.go), which scopes topic and group names
// to the caller's tenant as the Kafka front end does (names.go); the
// security admin API (secapi); the route hook of the operator console at
// /ui (console.go, broker/console), whose pages ask this API in process as
// their caller;
// and the internal routes the other brokers call on the inter-broker
// listener (forwarded publishes and reads, listings, health). Every error
// answer of it and its sub-packages (objapi, queueapi, secapi, healthapi) is apierr's
// {"error":{"code","message"}}, logged by status. It reaches the
// cluster through the Cluster interface the broker package satisfies, and
// never the Kafka front end.
package httpapi
