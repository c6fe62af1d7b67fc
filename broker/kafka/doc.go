// Package kafka is the broker's Kafka protocol front end: the listeners
// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and the inter-broker
// listener's Kafka side, connections and framing, the dispatch tables and
// one file per API key, all behind one request pipeline (pipeline.go:
// decode, route, authenticate, scope, authorise, admit, handle, respond).
// It reaches the cluster through the Cluster interface the broker package
// satisfies, and never the HTTP front end.
package kafka
