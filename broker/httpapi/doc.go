// Package httpapi is the broker's HTTP front end: the JSON API and its
// OpenAPI description, health and readiness, metrics and profiles, behind
// one request pipeline (pipeline.go); the security admin API (secapi);
// and the internal routes the other brokers call on the inter-broker
// listener (forwarded publishes and reads, listings). It reaches the
// cluster through the Cluster interface the broker package satisfies, and
// never the Kafka front end.
package httpapi
