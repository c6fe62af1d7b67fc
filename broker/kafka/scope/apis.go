package scope

// This file owns the scope stage's table: for each Kafka API, where its
// request and response hold topic names, topic IDs, group ids and
// transactional ids, and up to which version that layout is known.
//
// Invariant: every API the dispatch tables serve has an entry whose
// maxVersion is at least the highest version served
// (TestScopeCoversDispatch), and every string or ID field of a covered kmsg
// type is either handled here or listed as carrying no tenant's name
// (TestScopeKnowsEveryField), so a new API or a new kmsg field cannot slip
// past the stage unnoticed.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type scopeEntry struct {
	maxVersion int16
	request    func(*pass, kmsg.Request)  // nil: no names in the request
	response   func(*pass, kmsg.Response) // nil: no names in the response
}

// Config resource types that name a tenant's resource (KIP-848's group
// configs are covered before they are served).
const (
	configResourceTopic = 2
	configResourceGroup = 32
)

// scopeTable is filled once and never changed.
var scopeTable = map[int16]scopeEntry{
	0:  {13, scopeProduce, unscopeProduce},
	1:  {18, scopeFetch, unscopeFetch},
	2:  {11, scopeListOffsets, unscopeListOffsets},
	3:  {13, scopeMetadata, unscopeMetadata},
	8:  {9, scopeOffsetCommit, unscopeOffsetCommit}, // v10 names topics by ID: not covered
	9:  {9, scopeOffsetFetch, unscopeOffsetFetch},   // v10 likewise
	10: {6, scopeFindCoordinator, unscopeFindCoordinator},
	11: {9, func(p *pass, r kmsg.Request) { scopeGroup(p, &r.(*kmsg.JoinGroupRequest).Group) }, nil},
	12: {4, func(p *pass, r kmsg.Request) { scopeGroup(p, &r.(*kmsg.HeartbeatRequest).Group) }, nil},
	13: {5, func(p *pass, r kmsg.Request) { scopeGroup(p, &r.(*kmsg.LeaveGroupRequest).Group) }, nil},
	14: {5, func(p *pass, r kmsg.Request) { scopeGroup(p, &r.(*kmsg.SyncGroupRequest).Group) }, nil},
	15: {6, func(p *pass, r kmsg.Request) { p.names(r.(*kmsg.DescribeGroupsRequest).Groups) }, unscopeDescribeGroups},
	16: {5, nil, unscopeListGroups},
	19: {7, scopeCreateTopics, unscopeCreateTopics},
	20: {6, scopeDeleteTopics, unscopeDeleteTopics},
	21: {2, scopeDeleteRecords, unscopeDeleteRecords},
	22: {5, func(p *pass, r kmsg.Request) { p.namePtr(r.(*kmsg.InitProducerIDRequest).TransactionalID) }, nil},
	23: {4, scopeOffsetForLeaderEpoch, unscopeOffsetForLeaderEpoch},
	32: {4, scopeDescribeConfigs, unscopeDescribeConfigs},
	33: {2, scopeAlterConfigs, unscopeAlterConfigs},
	37: {3, scopeCreatePartitions, unscopeCreatePartitions},
	42: {3, func(p *pass, r kmsg.Request) { p.names(r.(*kmsg.DeleteGroupsRequest).Groups) }, unscopeDeleteGroups},
	44: {1, scopeIncrementalAlterConfigs, unscopeIncrementalAlterConfigs},
	47: {0, scopeOffsetDelete, unscopeOffsetDelete},

	// No tenant's names: version negotiation and SASL come before a
	// principal exists; ACL bindings name resources tenant-locally and
	// carry the tenant beside the name (broker/acl), so their handlers use
	// the principal's tenant themselves; user names are unique in the
	// cluster, not per tenant.
	17: {1, nil, nil}, // SaslHandshake
	18: {5, nil, nil}, // ApiVersions
	29: {3, nil, nil}, // DescribeAcls
	30: {3, nil, nil}, // CreateAcls
	31: {3, nil, nil}, // DeleteAcls
	36: {2, nil, nil}, // SaslAuthenticate
	50: {0, nil, nil}, // DescribeUserScramCredentials
	51: {0, nil, nil}, // AlterUserScramCredentials
	// Quota entities name tenants and users, both cluster-wide names.
	48: {1, nil, nil}, // DescribeClientQuotas
	49: {1, nil, nil}, // AlterClientQuotas
}

func scopeGroup(p *pass, group *string) { *group = p.name(*group) }

func scopeProduce(p *pass, req kmsg.Request) {
	r := req.(*kmsg.ProduceRequest)
	p.namePtr(r.TransactionID)
	for i := range r.Topics {
		t := &r.Topics[i]
		t.Topic = p.name(t.Topic)
		t.TopicID = p.id(t.TopicID) // v13
	}
}

func unscopeProduce(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.ProduceResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.ProduceResponseTopic) bool {
		ok, restored := p.topic(&t.Topic, &t.TopicID)
		for i := range t.Partitions {
			pt := &t.Partitions[i]
			if restored {
				pt.ErrorCode = kerr.UnknownTopicID.Code
				pt.BaseOffset, pt.LogAppendTime, pt.LogStartOffset = -1, -1, -1
				pt.ErrorMessage = nil
			}
			p.message(&pt.ErrorMessage)
			for j := range pt.ErrorRecords {
				p.message(&pt.ErrorRecords[j].ErrorMessage)
			}
		}
		return ok
	})
}

func scopeFetch(p *pass, req kmsg.Request) {
	r := req.(*kmsg.FetchRequest)
	for i := range r.Topics {
		t := &r.Topics[i]
		t.Topic = p.name(t.Topic)
		t.TopicID = p.id(t.TopicID) // v13+
	}
	for i := range r.ForgottenTopics {
		t := &r.ForgottenTopics[i]
		t.Topic = p.name(t.Topic)
		t.TopicID = p.id(t.TopicID)
	}
}

func unscopeFetch(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.FetchResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.FetchResponseTopic) bool {
		ok, restored := p.topic(&t.Topic, &t.TopicID)
		if restored {
			for i := range t.Partitions {
				part := kmsg.NewFetchResponseTopicPartition()
				part.Partition = t.Partitions[i].Partition
				part.ErrorCode = kerr.UnknownTopicID.Code
				part.HighWatermark = -1
				part.RecordBatches = []byte{} // librdkafka rejects a null record set
				t.Partitions[i] = part
			}
		}
		return ok
	})
}

func scopeListOffsets(p *pass, req kmsg.Request) {
	r := req.(*kmsg.ListOffsetsRequest)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeListOffsets(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.ListOffsetsResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.ListOffsetsResponseTopic) bool { return p.clientIn(&t.Topic) })
}

// scopeMetadata leaves a null topic list null: it asks for every topic,
// and the response is filtered to the tenant's.
func scopeMetadata(p *pass, req kmsg.Request) {
	r := req.(*kmsg.MetadataRequest)
	for i := range r.Topics {
		t := &r.Topics[i]
		p.namePtr(t.Topic)
		t.TopicID = p.id(t.TopicID) // v10+
	}
}

func unscopeMetadata(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.MetadataResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.MetadataResponseTopic) bool {
		ok, restored := p.topic(t.Topic, &t.TopicID)
		if restored {
			id := t.TopicID
			*t = kmsg.NewMetadataResponseTopic()
			t.TopicID = id
			t.ErrorCode = kerr.UnknownTopicID.Code
		}
		return ok
	})
}

func scopeOffsetCommit(p *pass, req kmsg.Request) {
	r := req.(*kmsg.OffsetCommitRequest)
	r.Group = p.name(r.Group)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeOffsetCommit(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.OffsetCommitResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.OffsetCommitResponseTopic) bool {
		ok, _ := p.topic(&t.Topic, &t.TopicID)
		return ok
	})
}

// scopeOffsetFetch covers both forms: one group (v0-7, a null topic list
// asking for all of the group's topics) and a batch of groups (v8+).
func scopeOffsetFetch(p *pass, req kmsg.Request) {
	r := req.(*kmsg.OffsetFetchRequest)
	r.Group = p.name(r.Group)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		g.Group = p.name(g.Group)
		for j := range g.Topics {
			g.Topics[j].Topic = p.name(g.Topics[j].Topic)
		}
	}
}

// unscopeOffsetFetch also removes another tenant's topics from the
// tenant's own group: a super user may have committed them there.
func unscopeOffsetFetch(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.OffsetFetchResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool { return p.clientIn(&t.Topic) })
	r.Groups = keep(r.Groups, func(g *kmsg.OffsetFetchResponseGroup) bool {
		if !p.clientIn(&g.Group) {
			return false
		}
		g.Topics = keep(g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool {
			ok, _ := p.topic(&t.Topic, &t.TopicID)
			return ok
		})
		return true
	})
}

// scopeFindCoordinator qualifies group and transactional ids alike: both
// belong to the tenant.
func scopeFindCoordinator(p *pass, req kmsg.Request) {
	r := req.(*kmsg.FindCoordinatorRequest)
	r.CoordinatorKey = p.name(r.CoordinatorKey)
	p.names(r.CoordinatorKeys)
}

func unscopeFindCoordinator(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.FindCoordinatorResponse)
	p.message(&r.ErrorMessage)
	r.Coordinators = keep(r.Coordinators, func(c *kmsg.FindCoordinatorResponseCoordinator) bool {
		p.message(&c.ErrorMessage)
		return p.clientIn(&c.Key)
	})
}

func unscopeDescribeGroups(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.DescribeGroupsResponse)
	r.Groups = keep(r.Groups, func(g *kmsg.DescribeGroupsResponseGroup) bool {
		p.message(&g.ErrorMessage)
		return p.clientIn(&g.Group)
	})
}

// unscopeListGroups is where a tenant's view of groups is made: the
// coordinator lists every group it owns.
func unscopeListGroups(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.ListGroupsResponse)
	r.Groups = keep(r.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return p.clientIn(&g.Group) })
}

func scopeCreateTopics(p *pass, req kmsg.Request) {
	r := req.(*kmsg.CreateTopicsRequest)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeCreateTopics(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.CreateTopicsResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.CreateTopicsResponseTopic) bool {
		p.message(&t.ErrorMessage)
		ok, _ := p.topic(&t.Topic, &t.TopicID)
		return ok
	})
}

func scopeDeleteTopics(p *pass, req kmsg.Request) {
	r := req.(*kmsg.DeleteTopicsRequest)
	p.names(r.TopicNames)     // v0-5
	for i := range r.Topics { // v6+: a name or an ID
		t := &r.Topics[i]
		p.namePtr(t.Topic)
		t.TopicID = p.id(t.TopicID)
	}
}

func unscopeDeleteTopics(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.DeleteTopicsResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.DeleteTopicsResponseTopic) bool {
		ok, restored := p.topic(t.Topic, &t.TopicID)
		if restored {
			t.Topic = nil
			t.ErrorCode = kerr.UnknownTopicID.Code
			t.ErrorMessage = nil // it names the placeholder
		}
		p.message(&t.ErrorMessage)
		return ok
	})
}

func scopeDeleteRecords(p *pass, req kmsg.Request) {
	r := req.(*kmsg.DeleteRecordsRequest)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeDeleteRecords(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.DeleteRecordsResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.DeleteRecordsResponseTopic) bool { return p.clientIn(&t.Topic) })
}

func scopeOffsetForLeaderEpoch(p *pass, req kmsg.Request) {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeOffsetForLeaderEpoch(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.OffsetForLeaderEpochResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.OffsetForLeaderEpochResponseTopic) bool { return p.clientIn(&t.Topic) })
}

// configName qualifies the name of a topic or group config resource; a
// broker's resource (its node ID) is no tenant's.
func (p *pass) configName(rtype kmsg.ConfigResourceType, name *string) {
	if rtype == configResourceTopic || rtype == configResourceGroup {
		*name = p.name(*name)
	}
}

// configClient is configName's way back; false removes the resource.
func (p *pass) configClient(rtype kmsg.ConfigResourceType, name *string, msg **string) bool {
	p.message(msg)
	if rtype == configResourceTopic || rtype == configResourceGroup {
		return p.clientIn(name)
	}
	return true
}

func scopeDescribeConfigs(p *pass, req kmsg.Request) {
	r := req.(*kmsg.DescribeConfigsRequest)
	for i := range r.Resources {
		p.configName(r.Resources[i].ResourceType, &r.Resources[i].ResourceName)
	}
}

func unscopeDescribeConfigs(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.DescribeConfigsResponse)
	r.Resources = keep(r.Resources, func(c *kmsg.DescribeConfigsResponseResource) bool {
		return p.configClient(c.ResourceType, &c.ResourceName, &c.ErrorMessage)
	})
}

func scopeAlterConfigs(p *pass, req kmsg.Request) {
	r := req.(*kmsg.AlterConfigsRequest)
	for i := range r.Resources {
		p.configName(r.Resources[i].ResourceType, &r.Resources[i].ResourceName)
	}
}

func unscopeAlterConfigs(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.AlterConfigsResponse)
	r.Resources = keep(r.Resources, func(c *kmsg.AlterConfigsResponseResource) bool {
		return p.configClient(c.ResourceType, &c.ResourceName, &c.ErrorMessage)
	})
}

func scopeIncrementalAlterConfigs(p *pass, req kmsg.Request) {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	for i := range r.Resources {
		p.configName(r.Resources[i].ResourceType, &r.Resources[i].ResourceName)
	}
}

func unscopeIncrementalAlterConfigs(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	r.Resources = keep(r.Resources, func(c *kmsg.IncrementalAlterConfigsResponseResource) bool {
		return p.configClient(c.ResourceType, &c.ResourceName, &c.ErrorMessage)
	})
}

func scopeCreatePartitions(p *pass, req kmsg.Request) {
	r := req.(*kmsg.CreatePartitionsRequest)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeCreatePartitions(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.CreatePartitionsResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.CreatePartitionsResponseTopic) bool {
		p.message(&t.ErrorMessage)
		return p.clientIn(&t.Topic)
	})
}

func unscopeDeleteGroups(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.DeleteGroupsResponse)
	r.Groups = keep(r.Groups, func(g *kmsg.DeleteGroupsResponseGroup) bool {
		p.message(&g.ErrorMessage)
		return p.clientIn(&g.Group)
	})
}

func scopeOffsetDelete(p *pass, req kmsg.Request) {
	r := req.(*kmsg.OffsetDeleteRequest)
	r.Group = p.name(r.Group)
	for i := range r.Topics {
		r.Topics[i].Topic = p.name(r.Topics[i].Topic)
	}
}

func unscopeOffsetDelete(p *pass, resp kmsg.Response) {
	r := resp.(*kmsg.OffsetDeleteResponse)
	r.Topics = keep(r.Topics, func(t *kmsg.OffsetDeleteResponseTopic) bool { return p.clientIn(&t.Topic) })
}
