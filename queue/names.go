package queue

// This file owns the names of the retry tiers and of the dead-letter topic
// (drawn in doc.go). Names here are tenant-local; the broker qualifies them
// with the group's tenant.
//
// Invariant: two different (group, topic, tier) triples never share a tier
// name, and every name returned is a valid Kafka topic name of at most
// budget characters (budget ≥ MinNameBudget).

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxTopicLen is Kafka's limit on a topic name.
const maxTopicLen = 249

// Prefixes of the two forms of a tier's name.
const (
	RetryPrefix       = "__retry."
	RetryHashedPrefix = "__retry-h."
)

// MinNameBudget is the shortest budget RetryTopic can always meet.
const MinNameBudget = len(RetryHashedPrefix) + 16 + 1 + 2

// RetryTopic is the tenant-local name of group's retry tier of topic, at
// most budget characters long (249 less the tenant's prefix).
func RetryTopic(group, topic string, tier, budget int) string {
	t := strconv.Itoa(tier)
	literal := RetryPrefix + group + "." + topic + "." + t
	if len(literal) <= budget && literalGroup(group) {
		return literal
	}
	sum := sha256.Sum256([]byte(group + "\x00" + topic))
	return RetryHashedPrefix + hex.EncodeToString(sum[:8]) + "." + t
}

// literalGroup reports whether a group's name can stand in a tier's name
// as it is: topic-name characters and no '.'.
func literalGroup(group string) bool {
	if group == "" || strings.Contains(group, ".") {
		return false
	}
	for _, r := range group {
		if !topicByte(r) {
			return false
		}
	}
	return true
}

// IsRetryTopic reports whether a tenant-local name is a retry tier's.
func IsRetryTopic(local string) bool {
	return strings.HasPrefix(local, RetryPrefix) || strings.HasPrefix(local, RetryHashedPrefix)
}

// DeadLetterTopic is the tenant-local name of topic's dead-letter topic:
// the configured one, or <topic>.dlq.
func (c Contract) DeadLetterTopic(topic string) string {
	if c.DeadLetter != "" {
		return c.DeadLetter
	}
	return topic + ".dlq"
}
