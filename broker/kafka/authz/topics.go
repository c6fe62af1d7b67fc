package authz

// This file owns the authorise rules (authz.go) of the APIs about topics,
// the cluster and producer ids: what each needs, Kafka's table.
//
//	Produce                  WRITE topic
//	Fetch                    READ topic (a follower's fetch: the inter-broker listener)
//	ListOffsets              DESCRIBE topic
//	Metadata                 DESCRIBE topic (listing: only the describable);
//	                         auto-creation also CREATE on the cluster or the topic
//	OffsetForLeaderEpoch     DESCRIBE topic; CLUSTER_ACTION cluster for a replica
//	CreateTopics             CREATE cluster or CREATE topic
//	DeleteTopics             DELETE topic
//	DeleteRecords            DELETE topic
//	CreatePartitions         ALTER topic
//	DescribeConfigs          DESCRIBE_CONFIGS topic or cluster (broker resources)
//	AlterConfigs, Incremental ALTER_CONFIGS topic or cluster
//	InitProducerId           WRITE transactional id, or IDEMPOTENT_WRITE cluster

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
)

var topicRefused = kerr.TopicAuthorizationFailed.Code

func Produce(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.ProduceRequest)
	var refused []kmsg.ProduceRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.ProduceRequestTopic) bool { return c.topic(acl.OpWrite, t.Topic) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		pr := resp.(*kmsg.ProduceResponse)
		for _, t := range refused {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, topicRefused, -1
				rp.ErrorMessage = refusedMessage(acl.OpWrite, acl.ResourceTopic, t.Topic)
				rt.Partitions = append(rt.Partitions, rp)
			}
			pr.Topics = append(pr.Topics, rt)
		}
	}}
}

func Fetch(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.FetchRequest)
	if id, _ := fetchReplica(r); id >= 0 {
		// A follower's fetch: refused on a client listener by the handler
		// whatever the identity (interbroker.go); nothing to decide here.
		return Result{}
	}
	allow := func(t *kmsg.FetchRequestTopic) bool {
		name := t.Topic
		if body.GetVersion() >= 13 {
			if name = c.topicName(t.TopicID); name == "" {
				return true // unknown id: the handler answers UNKNOWN_TOPIC_ID
			}
		}
		return c.topic(acl.OpRead, name)
	}
	var refused []kmsg.FetchRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, allow)
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		fr := resp.(*kmsg.FetchResponse)
		for _, t := range refused {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicRefused
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			fr.Topics = append(fr.Topics, rt)
		}
	}}
}

func ListOffsets(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.ListOffsetsRequest)
	var refused []kmsg.ListOffsetsRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return c.topic(acl.OpDescribe, t.Topic) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range refused {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = p.Partition, topicRefused, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			lr.Topics = append(lr.Topics, rt)
		}
	}}
}

// Metadata: a named topic the identity may not describe is answered
// TOPIC_AUTHORIZATION_FAILED; a missing one it may not create is answered
// UNKNOWN_TOPIC_OR_PARTITION instead of being auto-created; a listing of
// every topic keeps only the describable ones.
func Metadata(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.MetadataRequest)
	all := r.Topics == nil || (body.GetVersion() == 0 && len(r.Topics) == 0)
	type refusal struct {
		t    kmsg.MetadataRequestTopic
		code int16
	}
	var refused []refusal
	if !all {
		canCreate := func(name string) bool {
			return c.cluster(acl.OpCreate) || c.topic(acl.OpCreate, name)
		}
		r.Topics, _ = keepAllowed(r.Topics, func(t *kmsg.MetadataRequestTopic) bool {
			name := ""
			switch {
			case t.Topic != nil:
				name = *t.Topic
			case t.TopicID != [16]byte{}:
				if name = c.topicName(t.TopicID); name == "" {
					return true // the handler answers the unknown id
				}
			default:
				return true
			}
			switch {
			case !c.topic(acl.OpDescribe, name):
				refused = append(refused, refusal{*t, topicRefused})
				return false
			case !c.TopicExists(name) && !canCreate(name):
				refused = append(refused, refusal{*t, kerr.UnknownTopicOrPartition.Code})
				return false
			}
			return true
		})
		if len(r.Topics) == 0 && body.GetVersion() == 0 {
			// An empty v0 list would ask for every topic.
			resp := newResponse(body).(*kmsg.MetadataResponse)
			resp.Brokers = c.MetadataBrokers()
			for _, x := range refused {
				resp.Topics = append(resp.Topics, metadataTopicError(x.t, x.code))
			}
			return Result{Refused: resp}
		}
	}
	return Result{Merge: func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		if all {
			mr.Topics, _ = keepAllowed(mr.Topics, func(t *kmsg.MetadataResponseTopic) bool {
				return t.Topic == nil || c.topic(acl.OpDescribe, *t.Topic)
			})
		}
		for _, x := range refused {
			mr.Topics = append(mr.Topics, metadataTopicError(x.t, x.code))
		}
	}}
}

func OffsetForLeaderEpoch(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.OffsetForLeaderEpochRequest)
	replica := body.GetVersion() >= 3 && r.ReplicaID >= 0
	var refused []kmsg.OffsetForLeaderEpochRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool {
		if replica {
			return c.cluster(acl.OpClusterAction)
		}
		return c.topic(acl.OpDescribe, t.Topic)
	})
	if len(refused) == 0 {
		return Result{}
	}
	code := topicRefused
	if replica {
		code = kerr.ClusterAuthorizationFailed.Code
	}
	return Result{Merge: func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			or.Topics = append(or.Topics, rt)
		}
	}}
}

func CreateTopics(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.CreateTopicsRequest)
	var refused []kmsg.CreateTopicsRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool {
		return c.cluster(acl.OpCreate) || c.topic(acl.OpCreate, t.Topic)
	})
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range refused {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, topicRefused
			rt.ErrorMessage = refusedMessage(acl.OpCreate, acl.ResourceTopic, t.Topic)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			cr.Topics = append(cr.Topics, rt)
		}
	}}
}

func DeleteTopics(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.DeleteTopicsRequest)
	var refusedNames []string
	var refusedTopics []kmsg.DeleteTopicsRequestTopic
	r.TopicNames, refusedNames = keepAllowed(r.TopicNames, func(n *string) bool { return c.topic(acl.OpDelete, *n) })
	r.Topics, refusedTopics = keepAllowed(r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if name = c.topicName(t.TopicID); name == "" {
			return true
		}
		return c.topic(acl.OpDelete, name)
	})
	for _, n := range refusedNames {
		refusedTopics = append(refusedTopics, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr(n)})
	}
	if len(refusedTopics) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		for _, t := range refusedTopics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, topicRefused
			if t.Topic != nil {
				rt.ErrorMessage = refusedMessage(acl.OpDelete, acl.ResourceTopic, *t.Topic)
			}
			dr.Topics = append(dr.Topics, rt)
		}
	}}
}

func DeleteRecords(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.DeleteRecordsRequest)
	var refused []kmsg.DeleteRecordsRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) bool { return c.topic(acl.OpDelete, t.Topic) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range refused {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, topicRefused, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			dr.Topics = append(dr.Topics, rt)
		}
	}}
}

func CreatePartitions(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.CreatePartitionsRequest)
	var refused []kmsg.CreatePartitionsRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.CreatePartitionsRequestTopic) bool { return c.topic(acl.OpAlter, t.Topic) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range refused {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, topicRefused
			rt.ErrorMessage = refusedMessage(acl.OpAlter, acl.ResourceTopic, t.Topic)
			cr.Topics = append(cr.Topics, rt)
		}
	}}
}

// Config resource types of the config APIs (Kafka's ConfigResource.Type).
const (
	configResourceTopic  = 2
	configResourceBroker = 4
	configResourceLogger = 8
)

// configAllowed decides op on a config resource: a topic's own, or the
// cluster for a broker's or its loggers'.
func configAllowed(c *Check, op acl.Operation, rtype int8, name string) (bool, int16) {
	if rtype == configResourceTopic {
		return c.topic(op, name), topicRefused
	}
	return c.cluster(op), kerr.ClusterAuthorizationFailed.Code
}

// configRule is the rule of the three config APIs: it takes out of items
// the resources op is not allowed on, and merges back for each the answer
// refusal builds. of reads an item's resource type and name.
func configRule[Item, Answer any](c *Check, op acl.Operation, items *[]Item,
	of func(*Item) (kmsg.ConfigResourceType, string),
	refusal func(rt kmsg.ConfigResourceType, name string, code int16, msg *string) Answer,
	merge func(resp kmsg.Response, refused []Answer),
) Result {
	var refused []Answer
	*items, _ = keepAllowed(*items, func(x *Item) bool {
		rt, name := of(x)
		ok, code := configAllowed(c, op, int8(rt), name)
		if !ok {
			refused = append(refused, refusal(rt, name, code, refusedMessage(op, configACLType(int8(rt)), name)))
		}
		return ok
	})
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) { merge(resp, refused) }}
}

func DescribeConfigs(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.DescribeConfigsRequest)
	return configRule(c, acl.OpDescribeConfigs, &r.Resources,
		func(x *kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rt kmsg.ConfigResourceType, name string, code int16, msg *string) kmsg.DescribeConfigsResponseResource {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = rt, name, code, msg
			return rr
		},
		func(resp kmsg.Response, refused []kmsg.DescribeConfigsResponseResource) {
			dr := resp.(*kmsg.DescribeConfigsResponse)
			dr.Resources = append(dr.Resources, refused...)
		})
}

func AlterConfigs(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.AlterConfigsRequest)
	return configRule(c, acl.OpAlterConfigs, &r.Resources,
		func(x *kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rt kmsg.ConfigResourceType, name string, code int16, msg *string) kmsg.AlterConfigsResponseResource {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = rt, name, code, msg
			return rr
		},
		func(resp kmsg.Response, refused []kmsg.AlterConfigsResponseResource) {
			ar := resp.(*kmsg.AlterConfigsResponse)
			ar.Resources = append(ar.Resources, refused...)
		})
}

func IncrementalAlterConfigs(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.IncrementalAlterConfigsRequest)
	return configRule(c, acl.OpAlterConfigs, &r.Resources,
		func(x *kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return x.ResourceType, x.ResourceName
		},
		func(rt kmsg.ConfigResourceType, name string, code int16, msg *string) kmsg.IncrementalAlterConfigsResponseResource {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = rt, name, code, msg
			return rr
		},
		func(resp kmsg.Response, refused []kmsg.IncrementalAlterConfigsResponseResource) {
			ar := resp.(*kmsg.IncrementalAlterConfigsResponse)
			ar.Resources = append(ar.Resources, refused...)
		})
}

func configACLType(rtype int8) acl.ResourceType {
	if rtype == configResourceTopic {
		return acl.ResourceTopic
	}
	return acl.ResourceCluster
}

func InitProducerID(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.InitProducerIDRequest)
	var ok bool
	var code int16
	if r.TransactionalID != nil {
		ok, code = c.allowed(acl.OpWrite, acl.ResourceTransactionalID, *r.TransactionalID), kerr.TransactionalIDAuthorizationFailed.Code
	} else {
		ok, code = c.cluster(acl.OpIdempotentWrite), kerr.ClusterAuthorizationFailed.Code
	}
	if ok {
		return Result{}
	}
	resp := newResponse(body)
	SetTopLevelError(resp, code)
	return Result{Refused: resp}
}
