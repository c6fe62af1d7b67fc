// Package quotaadmit is the admit stage of a Kafka broker with tenants'
// rate quotas: Admitter, built by New over the broker's quota.Meters,
// implements kafka.Admitter and charges each request's bytes, records and
// handler time to its tenant, capping or answering a fetch of a tenant in
// debt.
//
// It imports package kafka for the Admission and Hold it returns; kafka
// never imports it (the broker composes the two with kafka.WithAdmitter).
package quotaadmit
