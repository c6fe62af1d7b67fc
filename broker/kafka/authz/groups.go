package authz

// This file owns the authorise rules (authz.go) of the group APIs, Kafka's
// table:
//
//	JoinGroup, SyncGroup, Heartbeat, LeaveGroup  READ group (refused whole)
//	OffsetCommit       READ group (refused whole), READ topic
//	OffsetFetch        DESCRIBE group, DESCRIBE topic (all topics: the describable)
//	OffsetDelete       DELETE group (refused whole), READ topic
//	FindCoordinator    DESCRIBE group, or DESCRIBE transactional id
//	DescribeGroups     DESCRIBE group
//	ListGroups         the groups the identity may DESCRIBE
//	DeleteGroups       DELETE group
//
// A refused group never reaches the coordinator, so its members, offsets
// and state are never in an answer to someone who may not see them.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
)

var groupRefused = kerr.GroupAuthorizationFailed.Code

// GroupMember: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.
func GroupMember(c *Check, body kmsg.Request) Result {
	var group string
	switch r := body.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	}
	if c.group(acl.OpRead, group) {
		return Result{}
	}
	resp := newResponse(body)
	SetTopLevelError(resp, groupRefused)
	return Result{Refused: resp}
}

func OffsetCommit(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.OffsetCommitRequest)
	groupOK := c.group(acl.OpRead, r.Group)
	var refused []kmsg.OffsetCommitRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.OffsetCommitRequestTopic) bool {
		return groupOK && c.topic(acl.OpRead, t.Topic)
	})
	code := topicRefused
	if !groupOK {
		code = groupRefused
	}
	if !groupOK {
		// Every partition is answered here: the coordinator is not asked.
		resp := newResponse(body).(*kmsg.OffsetCommitResponse)
		mergeOffsetCommit(resp, refused, code)
		return Result{Refused: resp}
	}
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		mergeOffsetCommit(resp.(*kmsg.OffsetCommitResponse), refused, code)
	}}
}

func mergeOffsetCommit(resp *kmsg.OffsetCommitResponse, refused []kmsg.OffsetCommitRequestTopic, code int16) {
	for _, t := range refused {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

func OffsetFetch(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.OffsetFetchRequest)
	if body.GetVersion() >= 8 {
		return authzOffsetFetchGroups(c, r)
	}
	if !c.group(acl.OpDescribe, r.Group) {
		resp := newResponse(body).(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = groupRefused
		for _, t := range r.Topics { // v0-1 have no top-level code
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: groupRefused})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Result{Refused: resp}
	}
	all := r.Topics == nil
	var refused []kmsg.OffsetFetchRequestTopic
	if !all {
		r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.OffsetFetchRequestTopic) bool { return c.topic(acl.OpDescribe, t.Topic) })
		if len(r.Topics) == 0 && len(refused) > 0 {
			// Nothing left: an empty list must not become "every topic"
			// (the handler treats null and empty alike in some versions).
			resp := newResponse(body).(*kmsg.OffsetFetchResponse)
			mergeOffsetFetch(resp, refused)
			return Result{Refused: resp}
		}
	}
	return Result{Merge: func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetFetchResponse)
		if all {
			or.Topics, _ = keepAllowed(or.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool { return c.topic(acl.OpDescribe, t.Topic) })
		}
		mergeOffsetFetch(or, refused)
	}}
}

func mergeOffsetFetch(resp *kmsg.OffsetFetchResponse, refused []kmsg.OffsetFetchRequestTopic) {
	for _, t := range refused {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: topicRefused})
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// authzOffsetFetchGroups is OffsetFetch v8+, with many groups.
func authzOffsetFetchGroups(c *Check, r *kmsg.OffsetFetchRequest) Result {
	var refusedGroups []string
	refusedTopics := map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	allTopics := map[string]bool{}
	r.Groups, _ = keepAllowed(r.Groups, func(g *kmsg.OffsetFetchRequestGroup) bool {
		if !c.group(acl.OpDescribe, g.Group) {
			refusedGroups = append(refusedGroups, g.Group)
			return false
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
			return true
		}
		var refused []kmsg.OffsetFetchRequestGroupTopic
		g.Topics, refused = keepAllowed(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) bool { return c.topic(acl.OpDescribe, t.Topic) })
		if len(refused) > 0 {
			refusedTopics[g.Group] = refused
		}
		return true
	})
	return Result{Merge: func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetFetchResponse)
		for i := range or.Groups {
			g := &or.Groups[i]
			if allTopics[g.Group] {
				g.Topics, _ = keepAllowed(g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool { return c.topic(acl.OpDescribe, t.Topic) })
			}
			for _, t := range refusedTopics[g.Group] {
				rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: topicRefused})
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, name := range refusedGroups {
			or.Groups = append(or.Groups, kmsg.OffsetFetchResponseGroup{Group: name, ErrorCode: groupRefused})
		}
	}}
}

func OffsetDelete(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.OffsetDeleteRequest)
	if !c.group(acl.OpDelete, r.Group) {
		resp := newResponse(body)
		SetTopLevelError(resp, groupRefused)
		return Result{Refused: resp}
	}
	var refused []kmsg.OffsetDeleteRequestTopic
	r.Topics, refused = keepAllowed(r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) bool { return c.topic(acl.OpRead, t.Topic) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		dr := resp.(*kmsg.OffsetDeleteResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: topicRefused})
			}
			dr.Topics = append(dr.Topics, rt)
		}
	}}
}

func FindCoordinator(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.FindCoordinatorRequest)
	allow := func(key string) (bool, int16) {
		switch r.CoordinatorType {
		case coordinatorKeyGroup:
			return c.group(acl.OpDescribe, key), groupRefused
		case coordinatorKeyTransaction:
			return c.allowed(acl.OpDescribe, acl.ResourceTransactionalID, key), kerr.TransactionalIDAuthorizationFailed.Code
		}
		return true, 0 // the handler refuses an unknown key type
	}
	if body.GetVersion() < 4 {
		if ok, code := allow(r.CoordinatorKey); !ok {
			resp := newResponse(body)
			SetTopLevelError(resp, code)
			return Result{Refused: resp}
		}
		return Result{}
	}
	var refused []kmsg.FindCoordinatorResponseCoordinator
	r.CoordinatorKeys, _ = keepAllowed(r.CoordinatorKeys, func(key *string) bool {
		ok, code := allow(*key)
		if !ok {
			refused = append(refused, kmsg.FindCoordinatorResponseCoordinator{Key: *key, NodeID: -1, Port: -1, ErrorCode: code})
		}
		return ok
	})
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		fr := resp.(*kmsg.FindCoordinatorResponse)
		fr.Coordinators = append(fr.Coordinators, refused...)
	}}
}

func DescribeGroups(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.DescribeGroupsRequest)
	var refused []string
	r.Groups, refused = keepAllowed(r.Groups, func(g *string) bool { return c.group(acl.OpDescribe, *g) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range refused {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupRefused
			rg.ErrorMessage = refusedMessage(acl.OpDescribe, acl.ResourceGroup, g)
			dr.Groups = append(dr.Groups, rg)
		}
	}}
}

func ListGroups(c *Check, _ kmsg.Request) Result {
	return Result{Merge: func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListGroupsResponse)
		lr.Groups, _ = keepAllowed(lr.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return c.group(acl.OpDescribe, g.Group) })
	}}
}

func DeleteGroups(c *Check, body kmsg.Request) Result {
	r := body.(*kmsg.DeleteGroupsRequest)
	var refused []string
	r.Groups, refused = keepAllowed(r.Groups, func(g *string) bool { return c.group(acl.OpDelete, *g) })
	if len(refused) == 0 {
		return Result{}
	}
	return Result{Merge: func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range refused {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupRefused
			rg.ErrorMessage = refusedMessage(acl.OpDelete, acl.ResourceGroup, g)
			dr.Groups = append(dr.Groups, rg)
		}
	}}
}
