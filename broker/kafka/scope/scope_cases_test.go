package scope

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scopeCases is one row per API the broker serves (and the ID forms): a
// request as a tenant's client sends it, the request the handler must see,
// a response as the broker would answer with internal names of several
// tenants, and what the client must read. Built afresh on each call:
// Request and Response rewrite in place.
func scopeCases() []scopeCase {
	unknownID := kerr.UnknownTopicID.Code
	ph0 := placeholderID(0)
	return []scopeCase{
		{
			name: "Produce", scope: acmeScope,
			req: &kmsg.ProduceRequest{Version: 9, TransactionID: kstr("tx"), Topics: []kmsg.ProduceRequestTopic{{Topic: "orders"}, {Topic: "x~y"}}},
			wantReq: &kmsg.ProduceRequest{Version: 9, TransactionID: kstr("acme~tx"),
				Topics: []kmsg.ProduceRequestTopic{{Topic: "acme~orders"}, {Topic: "acme~x~y"}}},
			resp: &kmsg.ProduceResponse{Version: 9, Topics: []kmsg.ProduceResponseTopic{
				{Topic: "acme~orders", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorMessage: kstr(`topic "acme~orders": boom`),
					ErrorRecords: []kmsg.ProduceResponseTopicPartitionErrorRecord{{ErrorMessage: kstr("acme~orders bad")}, {ErrorMessage: kstr("bob~x")}}}}},
				{Topic: "bob~orders"}, {Topic: "orders"},
				{Topic: "acme~x~y", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 3, ErrorMessage: kstr(`"acme~x~y"`)}}},
			}},
			wantResp: &kmsg.ProduceResponse{Version: 9, Topics: []kmsg.ProduceResponseTopic{
				{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorMessage: kstr(`topic "orders": boom`),
					ErrorRecords: []kmsg.ProduceResponseTopicPartitionErrorRecord{{ErrorMessage: kstr("orders bad")}, {}}}}},
				{Topic: "x~y", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 3}}},
			}},
		},
		{
			name: "Produce v13 by ID", scope: acmeScope,
			req:     &kmsg.ProduceRequest{Version: 13, Topics: []kmsg.ProduceRequestTopic{{TopicID: idAcme}, {TopicID: idBob}}},
			wantReq: &kmsg.ProduceRequest{Version: 13, Topics: []kmsg.ProduceRequestTopic{{TopicID: idAcme}, {TopicID: ph0}}},
			resp: &kmsg.ProduceResponse{Version: 13, Topics: []kmsg.ProduceResponseTopic{
				{TopicID: idAcme}, {TopicID: ph0, Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 3, ErrorMessage: kstr("~~~~")}}},
			}},
			wantResp: &kmsg.ProduceResponse{Version: 13, Topics: []kmsg.ProduceResponseTopic{
				{TopicID: idAcme}, {TopicID: idBob, Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: unknownID, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}}},
			}},
		},
		{
			name: "Fetch v12 by name", scope: acmeScope,
			req: &kmsg.FetchRequest{Version: 12, Topics: []kmsg.FetchRequestTopic{{Topic: "orders"}},
				ForgottenTopics: []kmsg.FetchRequestForgottenTopic{{Topic: "old"}}},
			wantReq: &kmsg.FetchRequest{Version: 12, Topics: []kmsg.FetchRequestTopic{{Topic: "acme~orders"}},
				ForgottenTopics: []kmsg.FetchRequestForgottenTopic{{Topic: "acme~old"}}},
			resp:     &kmsg.FetchResponse{Version: 12, Topics: []kmsg.FetchResponseTopic{{Topic: "acme~orders"}, {Topic: "bob~orders"}, {Topic: "orders"}}},
			wantResp: &kmsg.FetchResponse{Version: 12, Topics: []kmsg.FetchResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "Fetch v13 by ID", scope: acmeScope,
			req: &kmsg.FetchRequest{Version: 13, Topics: []kmsg.FetchRequestTopic{{TopicID: idAcme}, {TopicID: idBob}},
				ForgottenTopics: []kmsg.FetchRequestForgottenTopic{{TopicID: idDefault}}},
			wantReq: &kmsg.FetchRequest{Version: 13, Topics: []kmsg.FetchRequestTopic{{TopicID: idAcme}, {TopicID: ph0}},
				ForgottenTopics: []kmsg.FetchRequestForgottenTopic{{TopicID: placeholderID(1)}}},
			resp: &kmsg.FetchResponse{Version: 13, Topics: []kmsg.FetchResponseTopic{
				{TopicID: idAcme, Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 4, RecordBatches: []byte("acme's")}}},
				{TopicID: ph0, Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 2, ErrorCode: unknownID}}},
				{TopicID: idBob, Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: []byte("bob's")}}},
			}},
			wantResp: &kmsg.FetchResponse{Version: 13, Topics: []kmsg.FetchResponseTopic{
				{TopicID: idAcme, Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 4, RecordBatches: []byte("acme's")}}},
				{TopicID: idBob, Partitions: []kmsg.FetchResponseTopicPartition{fetchUnknownID(2)}},
			}},
		},
		{
			name: "ListOffsets", scope: acmeScope,
			req:      &kmsg.ListOffsetsRequest{Version: 7, Topics: []kmsg.ListOffsetsRequestTopic{{Topic: "orders"}}},
			wantReq:  &kmsg.ListOffsetsRequest{Version: 7, Topics: []kmsg.ListOffsetsRequestTopic{{Topic: "acme~orders"}}},
			resp:     &kmsg.ListOffsetsResponse{Version: 7, Topics: []kmsg.ListOffsetsResponseTopic{{Topic: "bob~orders"}, {Topic: "acme~orders"}}},
			wantResp: &kmsg.ListOffsetsResponse{Version: 7, Topics: []kmsg.ListOffsetsResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "Metadata of every topic", scope: acmeScope,
			req:     &kmsg.MetadataRequest{Version: 12},
			wantReq: &kmsg.MetadataRequest{Version: 12},
			resp: &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{
				{Topic: kstr("acme~orders"), TopicID: idAcme}, {Topic: kstr("bob~orders"), TopicID: idBob},
				{Topic: kstr("orders"), TopicID: idDefault}, {Topic: kstr("acme~payments"), TopicID: idAcmePay},
			}},
			wantResp: &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{
				{Topic: kstr("orders"), TopicID: idAcme}, {Topic: kstr("payments"), TopicID: idAcmePay},
			}},
		},
		{
			name: "Metadata of every topic, default tenant", scope: defaultScope,
			req:     &kmsg.MetadataRequest{Version: 0, Topics: []kmsg.MetadataRequestTopic{}},
			wantReq: &kmsg.MetadataRequest{Version: 0, Topics: []kmsg.MetadataRequestTopic{}},
			resp: &kmsg.MetadataResponse{Version: 0, Topics: []kmsg.MetadataResponseTopic{
				{Topic: kstr("acme~orders")}, {Topic: kstr("orders")}, {Topic: kstr("default~orders")}, // a super user's non-canonical spelling
			}},
			wantResp: &kmsg.MetadataResponse{Version: 0, Topics: []kmsg.MetadataResponseTopic{{Topic: kstr("orders")}}},
		},
		{
			name: "Metadata by name and ID", scope: acmeScope,
			req: &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{
				{Topic: kstr("orders")}, {TopicID: idBob}, {TopicID: idAcmePay}, {Topic: kstr("new")},
			}},
			wantReq: &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{
				{Topic: kstr("acme~orders")}, {TopicID: ph0}, {TopicID: idAcmePay}, {Topic: kstr("acme~new")},
			}},
			resp: &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{
				{Topic: kstr("acme~orders"), TopicID: idAcme}, {TopicID: ph0, ErrorCode: kerr.UnknownTopicOrPartition.Code},
				{Topic: kstr("acme~payments"), TopicID: idAcmePay}, {Topic: kstr("acme~new"), ErrorCode: kerr.UnknownTopicOrPartition.Code},
			}},
			wantResp: &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{
				{Topic: kstr("orders"), TopicID: idAcme}, metadataUnknownID(idBob),
				{Topic: kstr("payments"), TopicID: idAcmePay}, {Topic: kstr("new"), ErrorCode: kerr.UnknownTopicOrPartition.Code},
			}},
		},
		{
			name: "CreateTopics", scope: acmeScope,
			req:     &kmsg.CreateTopicsRequest{Version: 7, Topics: []kmsg.CreateTopicsRequestTopic{{Topic: "orders"}, {Topic: "x~y"}}},
			wantReq: &kmsg.CreateTopicsRequest{Version: 7, Topics: []kmsg.CreateTopicsRequestTopic{{Topic: "acme~orders"}, {Topic: "acme~x~y"}}},
			resp: &kmsg.CreateTopicsResponse{Version: 7, Topics: []kmsg.CreateTopicsResponseTopic{
				{Topic: "acme~orders", TopicID: idAcme},
				{Topic: "acme~x~y", ErrorCode: kerr.InvalidTopicException.Code, ErrorMessage: kstr(`invalid topic name: "acme~x~y"`)},
			}},
			wantResp: &kmsg.CreateTopicsResponse{Version: 7, Topics: []kmsg.CreateTopicsResponseTopic{
				{Topic: "orders", TopicID: idAcme},
				{Topic: "x~y", ErrorCode: kerr.InvalidTopicException.Code}, // the message would still hold a '~'
			}},
		},
		{
			name: "DeleteTopics v5 by name", scope: acmeScope,
			req:     &kmsg.DeleteTopicsRequest{Version: 5, TopicNames: []string{"orders"}},
			wantReq: &kmsg.DeleteTopicsRequest{Version: 5, TopicNames: []string{"acme~orders"}},
			resp: &kmsg.DeleteTopicsResponse{Version: 5, Topics: []kmsg.DeleteTopicsResponseTopic{
				{Topic: kstr("acme~orders"), ErrorMessage: kstr(`topic "acme~orders" busy`)},
			}},
			wantResp: &kmsg.DeleteTopicsResponse{Version: 5, Topics: []kmsg.DeleteTopicsResponseTopic{
				{Topic: kstr("orders"), ErrorMessage: kstr(`topic "orders" busy`)},
			}},
		},
		{
			name: "DeleteTopics v6 by name and ID", scope: acmeScope,
			req:     &kmsg.DeleteTopicsRequest{Version: 6, Topics: []kmsg.DeleteTopicsRequestTopic{{Topic: kstr("orders")}, {TopicID: idBob}}},
			wantReq: &kmsg.DeleteTopicsRequest{Version: 6, Topics: []kmsg.DeleteTopicsRequestTopic{{Topic: kstr("acme~orders")}, {TopicID: ph0}}},
			resp: &kmsg.DeleteTopicsResponse{Version: 6, Topics: []kmsg.DeleteTopicsResponseTopic{
				{Topic: kstr("acme~orders"), TopicID: idAcme},
				{TopicID: ph0, ErrorCode: kerr.UnknownTopicOrPartition.Code, ErrorMessage: kstr("topic id fn5-fg: not oracleFinds")},
			}},
			wantResp: &kmsg.DeleteTopicsResponse{Version: 6, Topics: []kmsg.DeleteTopicsResponseTopic{
				{Topic: kstr("orders"), TopicID: idAcme}, {TopicID: idBob, ErrorCode: unknownID},
			}},
		},
		{
			name: "CreatePartitions", scope: acmeScope,
			req:     &kmsg.CreatePartitionsRequest{Version: 3, Topics: []kmsg.CreatePartitionsRequestTopic{{Topic: "orders"}}},
			wantReq: &kmsg.CreatePartitionsRequest{Version: 3, Topics: []kmsg.CreatePartitionsRequestTopic{{Topic: "acme~orders"}}},
			resp: &kmsg.CreatePartitionsResponse{Version: 3, Topics: []kmsg.CreatePartitionsResponseTopic{
				{Topic: "acme~orders", ErrorMessage: kstr("acme~orders has 3")}, {Topic: "bob~orders"},
			}},
			wantResp: &kmsg.CreatePartitionsResponse{Version: 3, Topics: []kmsg.CreatePartitionsResponseTopic{
				{Topic: "orders", ErrorMessage: kstr("orders has 3")},
			}},
		},
		{
			name: "DeleteRecords", scope: acmeScope,
			req:      &kmsg.DeleteRecordsRequest{Version: 2, Topics: []kmsg.DeleteRecordsRequestTopic{{Topic: "orders"}}},
			wantReq:  &kmsg.DeleteRecordsRequest{Version: 2, Topics: []kmsg.DeleteRecordsRequestTopic{{Topic: "acme~orders"}}},
			resp:     &kmsg.DeleteRecordsResponse{Version: 2, Topics: []kmsg.DeleteRecordsResponseTopic{{Topic: "acme~orders"}, {Topic: "orders"}}},
			wantResp: &kmsg.DeleteRecordsResponse{Version: 2, Topics: []kmsg.DeleteRecordsResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "OffsetForLeaderEpoch", scope: acmeScope,
			req:      &kmsg.OffsetForLeaderEpochRequest{Version: 4, Topics: []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "orders"}}},
			wantReq:  &kmsg.OffsetForLeaderEpochRequest{Version: 4, Topics: []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "acme~orders"}}},
			resp:     &kmsg.OffsetForLeaderEpochResponse{Version: 4, Topics: []kmsg.OffsetForLeaderEpochResponseTopic{{Topic: "bob~orders"}, {Topic: "acme~orders"}}},
			wantResp: &kmsg.OffsetForLeaderEpochResponse{Version: 4, Topics: []kmsg.OffsetForLeaderEpochResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "DescribeConfigs", scope: acmeScope,
			req: &kmsg.DescribeConfigsRequest{Version: 4, Resources: []kmsg.DescribeConfigsRequestResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
			}},
			wantReq: &kmsg.DescribeConfigsRequest{Version: 4, Resources: []kmsg.DescribeConfigsRequestResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
			}},
			resp: &kmsg.DescribeConfigsResponse{Version: 4, Resources: []kmsg.DescribeConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders"},
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "bob~orders"},
				{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
			}},
			wantResp: &kmsg.DescribeConfigsResponse{Version: 4, Resources: []kmsg.DescribeConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
			}},
		},
		{
			name: "AlterConfigs", scope: acmeScope,
			req:     &kmsg.AlterConfigsRequest{Version: 2, Resources: []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}}},
			wantReq: &kmsg.AlterConfigsRequest{Version: 2, Resources: []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders"}}},
			resp: &kmsg.AlterConfigsResponse{Version: 2, Resources: []kmsg.AlterConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders", ErrorMessage: kstr(`"acme~orders": bad`)},
			}},
			wantResp: &kmsg.AlterConfigsResponse{Version: 2, Resources: []kmsg.AlterConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders", ErrorMessage: kstr(`"orders": bad`)},
			}},
		},
		{
			name: "IncrementalAlterConfigs", scope: acmeScope,
			req: &kmsg.IncrementalAlterConfigsRequest{Version: 1, Resources: []kmsg.IncrementalAlterConfigsRequestResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker},
			}},
			wantReq: &kmsg.IncrementalAlterConfigsRequest{Version: 1, Resources: []kmsg.IncrementalAlterConfigsRequestResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker},
			}},
			resp: &kmsg.IncrementalAlterConfigsResponse{Version: 1, Resources: []kmsg.IncrementalAlterConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "acme~orders"}, {ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"},
			}},
			wantResp: &kmsg.IncrementalAlterConfigsResponse{Version: 1, Resources: []kmsg.IncrementalAlterConfigsResponseResource{
				{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"},
			}},
		},
		{
			name: "InitProducerId transactional", scope: acmeScope,
			req:     &kmsg.InitProducerIDRequest{Version: 4, TransactionalID: kstr("tx")},
			wantReq: &kmsg.InitProducerIDRequest{Version: 4, TransactionalID: kstr("acme~tx")},
		},
		{
			name: "InitProducerId idempotent", scope: acmeScope,
			req:     &kmsg.InitProducerIDRequest{Version: 4},
			wantReq: &kmsg.InitProducerIDRequest{Version: 4},
		},
		{
			name: "FindCoordinator v3", scope: acmeScope,
			req:      &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "billing"},
			wantReq:  &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "acme~billing"},
			resp:     &kmsg.FindCoordinatorResponse{Version: 3, ErrorMessage: kstr(`group "acme~billing" is loading`)},
			wantResp: &kmsg.FindCoordinatorResponse{Version: 3, ErrorMessage: kstr(`group "billing" is loading`)},
		},
		{
			name: "FindCoordinator v4 batched", scope: acmeScope,
			req:     &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorType: 1, CoordinatorKeys: []string{"billing", "tx"}},
			wantReq: &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorType: 1, CoordinatorKeys: []string{"acme~billing", "acme~tx"}},
			resp: &kmsg.FindCoordinatorResponse{Version: 4, Coordinators: []kmsg.FindCoordinatorResponseCoordinator{
				{Key: "acme~billing"}, {Key: "bob~billing"}, {Key: "acme~tx", ErrorMessage: kstr("bob~tx too")},
			}},
			wantResp: &kmsg.FindCoordinatorResponse{Version: 4, Coordinators: []kmsg.FindCoordinatorResponseCoordinator{
				{Key: "billing"}, {Key: "tx"},
			}},
		},
		{
			name: "JoinGroup", scope: acmeScope,
			req: &kmsg.JoinGroupRequest{Version: 9, Group: "billing", Protocols: []kmsg.JoinGroupRequestProtocol{
				{Name: "range", Metadata: []byte("orders")}, // the members' own bytes, left alone
			}},
			wantReq: &kmsg.JoinGroupRequest{Version: 9, Group: "acme~billing", Protocols: []kmsg.JoinGroupRequestProtocol{
				{Name: "range", Metadata: []byte("orders")},
			}},
			resp:     &kmsg.JoinGroupResponse{Version: 9, Members: []kmsg.JoinGroupResponseMember{{MemberID: "m", ProtocolMetadata: []byte("orders")}}},
			wantResp: &kmsg.JoinGroupResponse{Version: 9, Members: []kmsg.JoinGroupResponseMember{{MemberID: "m", ProtocolMetadata: []byte("orders")}}},
		},
		{
			name: "SyncGroup", scope: acmeScope,
			req: &kmsg.SyncGroupRequest{Version: 5, Group: "billing", GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{
				{MemberID: "m", MemberAssignment: []byte("orders")},
			}},
			wantReq: &kmsg.SyncGroupRequest{Version: 5, Group: "acme~billing", GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{
				{MemberID: "m", MemberAssignment: []byte("orders")},
			}},
		},
		{
			name: "Heartbeat", scope: acmeScope,
			req:     &kmsg.HeartbeatRequest{Version: 4, Group: "billing"},
			wantReq: &kmsg.HeartbeatRequest{Version: 4, Group: "acme~billing"},
		},
		{
			name: "LeaveGroup", scope: acmeScope,
			req:     &kmsg.LeaveGroupRequest{Version: 5, Group: "billing"},
			wantReq: &kmsg.LeaveGroupRequest{Version: 5, Group: "acme~billing"},
		},
		{
			name: "OffsetCommit", scope: acmeScope,
			req: &kmsg.OffsetCommitRequest{Version: 9, Group: "billing", Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "orders"}}},
			wantReq: &kmsg.OffsetCommitRequest{Version: 9, Group: "acme~billing",
				Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "acme~orders"}}},
			resp:     &kmsg.OffsetCommitResponse{Version: 9, Topics: []kmsg.OffsetCommitResponseTopic{{Topic: "acme~orders"}, {Topic: "orders"}}},
			wantResp: &kmsg.OffsetCommitResponse{Version: 9, Topics: []kmsg.OffsetCommitResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "OffsetFetch v7 every topic", scope: acmeScope,
			req:     &kmsg.OffsetFetchRequest{Version: 7, Group: "billing"},
			wantReq: &kmsg.OffsetFetchRequest{Version: 7, Group: "acme~billing"},
			resp: &kmsg.OffsetFetchResponse{Version: 7, Topics: []kmsg.OffsetFetchResponseTopic{
				{Topic: "acme~orders"}, {Topic: "bob~orders"}, {Topic: "orders"}, // a super user committed the others
			}},
			wantResp: &kmsg.OffsetFetchResponse{Version: 7, Topics: []kmsg.OffsetFetchResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "OffsetFetch v8 batched groups", scope: acmeScope,
			req: &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{
				{Group: "billing", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders"}}}, {Group: "audit"},
			}},
			wantReq: &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{
				{Group: "acme~billing", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "acme~orders"}}}, {Group: "acme~audit"},
			}},
			resp: &kmsg.OffsetFetchResponse{Version: 8, Groups: []kmsg.OffsetFetchResponseGroup{
				{Group: "acme~billing", Topics: []kmsg.OffsetFetchResponseGroupTopic{{Topic: "acme~orders"}, {Topic: "bob~orders"}}},
				{Group: "bob~audit", Topics: []kmsg.OffsetFetchResponseGroupTopic{{Topic: "bob~orders"}}},
			}},
			wantResp: &kmsg.OffsetFetchResponse{Version: 8, Groups: []kmsg.OffsetFetchResponseGroup{
				{Group: "billing", Topics: []kmsg.OffsetFetchResponseGroupTopic{{Topic: "orders"}}},
			}},
		},
		{
			name: "OffsetDelete", scope: acmeScope,
			req:      &kmsg.OffsetDeleteRequest{Group: "billing", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "orders"}}},
			wantReq:  &kmsg.OffsetDeleteRequest{Group: "acme~billing", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "acme~orders"}}},
			resp:     &kmsg.OffsetDeleteResponse{Topics: []kmsg.OffsetDeleteResponseTopic{{Topic: "acme~orders"}, {Topic: "bob~orders"}}},
			wantResp: &kmsg.OffsetDeleteResponse{Topics: []kmsg.OffsetDeleteResponseTopic{{Topic: "orders"}}},
		},
		{
			name: "DescribeGroups", scope: acmeScope,
			req:     &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"billing", "my~group"}},
			wantReq: &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"acme~billing", "acme~my~group"}},
			resp: &kmsg.DescribeGroupsResponse{Version: 5, Groups: []kmsg.DescribeGroupsResponseGroup{
				{Group: "acme~billing", Members: []kmsg.DescribeGroupsResponseGroupMember{{MemberID: "m", MemberAssignment: []byte("orders")}}},
				{Group: "acme~my~group"}, {Group: "bob~billing"},
			}},
			wantResp: &kmsg.DescribeGroupsResponse{Version: 5, Groups: []kmsg.DescribeGroupsResponseGroup{
				{Group: "billing", Members: []kmsg.DescribeGroupsResponseGroupMember{{MemberID: "m", MemberAssignment: []byte("orders")}}},
				{Group: "my~group"},
			}},
		},
		{
			name: "ListGroups", scope: acmeScope,
			req:     &kmsg.ListGroupsRequest{Version: 4},
			wantReq: &kmsg.ListGroupsRequest{Version: 4},
			resp: &kmsg.ListGroupsResponse{Version: 4, Groups: []kmsg.ListGroupsResponseGroup{
				{Group: "acme~billing"}, {Group: "bob~billing"}, {Group: "billing"}, {Group: "default~a~b"}, {Group: "acme~my~group"},
			}},
			wantResp: &kmsg.ListGroupsResponse{Version: 4, Groups: []kmsg.ListGroupsResponseGroup{{Group: "billing"}, {Group: "my~group"}}},
		},
		{
			name: "ListGroups, default tenant", scope: defaultScope,
			req:     &kmsg.ListGroupsRequest{Version: 4},
			wantReq: &kmsg.ListGroupsRequest{Version: 4},
			resp: &kmsg.ListGroupsResponse{Version: 4, Groups: []kmsg.ListGroupsResponseGroup{
				{Group: "acme~billing"}, {Group: "billing"}, {Group: "default~a~b"}, {Group: "default~billing"},
			}},
			wantResp: &kmsg.ListGroupsResponse{Version: 4, Groups: []kmsg.ListGroupsResponseGroup{{Group: "billing"}, {Group: "a~b"}}},
		},
		{
			name: "DeleteGroups", scope: acmeScope,
			req:     &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"billing"}},
			wantReq: &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"acme~billing"}},
			resp: &kmsg.DeleteGroupsResponse{Version: 2, Groups: []kmsg.DeleteGroupsResponseGroup{
				{Group: "acme~billing", ErrorMessage: kstr("acme~billing is not empty")}, {Group: "bob~billing"},
			}},
			wantResp: &kmsg.DeleteGroupsResponse{Version: 2, Groups: []kmsg.DeleteGroupsResponseGroup{
				{Group: "billing", ErrorMessage: kstr("billing is not empty")},
			}},
		},
		{
			// The default tenant's names stay as they are, but one that
			// looks qualified is the default tenant's own, not acme's.
			name: "default tenant", scope: defaultScope,
			req: &kmsg.OffsetCommitRequest{Version: 9, Group: "acme~billing", Topics: []kmsg.OffsetCommitRequestTopic{
				{Topic: "orders"}, {Topic: "acme~orders"},
			}},
			wantReq: &kmsg.OffsetCommitRequest{Version: 9, Group: "default~acme~billing", Topics: []kmsg.OffsetCommitRequestTopic{
				{Topic: "orders"}, {Topic: "default~acme~orders"},
			}},
			resp: &kmsg.OffsetCommitResponse{Version: 9, Topics: []kmsg.OffsetCommitResponseTopic{
				{Topic: "orders"}, {Topic: "default~acme~orders", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{ErrorCode: 3}}}, {Topic: "acme~orders"},
			}},
			wantResp: &kmsg.OffsetCommitResponse{Version: 9, Topics: []kmsg.OffsetCommitResponseTopic{
				{Topic: "orders"}, {Topic: "acme~orders", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{ErrorCode: 3}}},
			}},
		},
	}
}

// metadataUnknownID is the answer to a topic ID the client may not see.
func metadataUnknownID(id [16]byte) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.TopicID = id
	t.ErrorCode = kerr.UnknownTopicID.Code
	return t
}

// fetchUnknownID is the answer to a partition of a topic ID the client may
// not see.
func fetchUnknownID(partition int32) kmsg.FetchResponseTopicPartition {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = partition
	p.ErrorCode = kerr.UnknownTopicID.Code
	p.HighWatermark = -1
	p.RecordBatches = []byte{}
	return p
}
