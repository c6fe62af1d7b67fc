package kafka

// This file owns the dispatch table: which Kafka APIs this broker serves,
// the version range it advertises for each, and the handler. The pipeline
// (pipeline.go) routes every request through it.
//
// Invariant: a version is advertised only when the handler implements it
// fully; franz-go uses the highest advertised version.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const apiVersionsKey = 18

type handler func(b *Server, ctx context.Context, req *request) (reply, error)

type api struct {
	min, max int16
	handle   handler
}

// apis is the dispatch table, by API key. Minimums reach as low as the
// clients tested in e2e need: librdkafka needs the old versions advertised
// to turn features on. It is filled once in init (ApiVersions reads it) and
// never changed.
var apis map[int16]api

func init() {
	apis = apiTable()
	for k, a := range groupAPIs() {
		apis[k] = a
	}
	for k, a := range adminAPIs() {
		apis[k] = a
	}
}

func apiTable() map[int16]api {
	return map[int16]api{
		0:  {min: 0, max: 11, handle: handleProduce},                // Produce: v0-2 answered UNSUPPORTED_VERSION, as Kafka 4
		1:  {min: 4, max: 13, handle: handleFetch},                  // Fetch
		2:  {min: 1, max: 6, handle: handleListOffsets},             // ListOffsets
		3:  {min: 0, max: 12, handle: handleMetadata},               // Metadata
		18: {min: 0, max: 3, handle: handleApiVersions},             // ApiVersions
		19: {min: 2, max: 7, handle: handleCreateTopics},            // CreateTopics
		20: {min: 1, max: 6, handle: handleDeleteTopics},            // DeleteTopics
		21: {min: 0, max: 2, handle: handleDeleteRecords},           // DeleteRecords
		22: {min: 0, max: 4, handle: handleInitProducerID},          // InitProducerId
		23: {min: 2, max: 4, handle: handleOffsetForLeaderEpoch},    // OffsetForLeaderEpoch: librdkafka asks v2, franz-go v4; Kafka 4 dropped v0-1
		32: {min: 1, max: 4, handle: handleDescribeConfigs},         // DescribeConfigs
		33: {min: 0, max: 2, handle: handleAlterConfigs},            // AlterConfigs
		37: {min: 0, max: 3, handle: handleCreatePartitions},        // CreatePartitions
		44: {min: 0, max: 1, handle: handleIncrementalAlterConfigs}, // IncrementalAlterConfigs
		48: {min: 0, max: 1, handle: handleDescribeClientQuotas},    // DescribeClientQuotas (api_client_quotas.go)
		49: {min: 0, max: 1, handle: handleAlterClientQuotas},       // AlterClientQuotas
		17: {min: 0, max: 1, handle: handleSaslHandshake},           // SaslHandshake: v0 answered UNSUPPORTED_VERSION
		36: {min: 0, max: 2, handle: handleSaslAuthenticate},        // SaslAuthenticate
	}
}

// route finds the entry of req in its listener's table and checks the
// version (the pipeline's route stage). An error closes the connection.
func route(req *request) (api, error) {
	a, ok := apisOf(req)[req.key]
	if !ok {
		return api{}, fmt.Errorf("%w: api %s (%d) is not served", errFrame, kmsg.NameForKey(req.key), req.key)
	}
	if req.key != apiVersionsKey && (req.version < a.min || req.version > a.max) {
		return api{}, fmt.Errorf("%w: %s version %d outside the advertised %d-%d", errFrame,
			kmsg.NameForKey(req.key), req.version, a.min, a.max)
	}
	return a, nil
}

// newResponse returns the response type of req at the request's version.
func newResponse(req *request) kmsg.Response {
	resp := req.body.ResponseKind()
	resp.SetVersion(req.version)
	return resp
}

// groupAPIs returns the dispatch entries of the group coordinator. Topic-ID
// forms of coordinator.OffsetCommit and OffsetFetch (v10+) and KIP-848 are not served.
func groupAPIs() map[int16]api {
	return map[int16]api{
		8:  {min: 0, max: 9, handle: handleOffsetCommit},
		9:  {min: 0, max: 9, handle: handleOffsetFetch},
		10: {min: 0, max: 5, handle: handleFindCoordinator},
		11: {min: 0, max: 9, handle: handleJoinGroup},
		12: {min: 0, max: 4, handle: handleHeartbeat},
		13: {min: 0, max: 5, handle: handleLeaveGroup},
		14: {min: 0, max: 5, handle: handleSyncGroup},
		15: {min: 0, max: 6, handle: handleDescribeGroups},
		16: {min: 0, max: 5, handle: handleListGroups},
		42: {min: 0, max: 3, handle: handleDeleteGroups},
		47: {min: 0, max: 0, handle: handleOffsetDelete},
	}
}
