// Package httpapi is the broker's HTTP front end: the JSON API and its
// OpenAPI description, health and readiness, metrics and profiles, behind
// one request pipeline (pipeline.go), which scopes topic and group names
// to the caller's tenant as the Kafka front end does (names.go); the
// security admin API (secapi);
// and the internal routes the other brokers call on the inter-broker
// listener (forwarded publishes and reads, listings). It reaches the
// cluster through the Cluster interface the broker package satisfies, and
// never the Kafka front end.
package httpapi
