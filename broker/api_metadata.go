package broker

// Metadata (key 3): brokers, the controller, and topics with their
// partitions, leaders and leader epochs. Topics named in the request are
// created on first use when auto-creation is on, as in Kafka.

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleMetadata(b *Broker, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.MetadataRequest)
	resp := newResponse(req).(*kmsg.MetadataResponse)

	host, portStr, _ := net.SplitHostPort(b.advertise)
	port, _ := strconv.Atoi(portStr)
	rack := b.cfg.AZ
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: int32(port), Rack: &rack}}
	clusterID := b.clusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = b.cfg.NodeID

	// v0 asks for every topic with an empty list; later versions with null.
	all := r.Topics == nil || (req.version == 0 && len(r.Topics) == 0)
	if all {
		for _, t := range b.sortedTopics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		return done(resp), nil
	}
	allowCreate := b.cfg.AutoCreateTopics && (req.version < 4 || r.AllowAutoTopicCreation)
	for _, rt := range r.Topics {
		var t *topic
		name := ""
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
			t = b.lookupTopic(name)
		case rt.TopicID != [16]byte{}:
			t = b.lookupTopicID(rt.TopicID)
		}
		if t == nil && rt.Topic != nil {
			if err := validateTopicName(name); err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(rt, kerr.InvalidTopicException.Code))
				continue
			}
			if allowCreate {
				var err error
				t, err = b.autoCreate(ctx, name)
				if err != nil && !errors.Is(err, errUnknownTopic) {
					b.logger.Warn().Err(err).Str("topic", name).Msg("auto-create topic")
				}
			}
		}
		if t == nil {
			resp.Topics = append(resp.Topics, metadataTopicError(rt, kerr.UnknownTopicOrPartition.Code))
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	return done(resp), nil
}

func metadataTopicError(rt kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = rt.Topic
	t.TopicID = rt.TopicID
	t.ErrorCode = code
	return t
}

func (b *Broker) metadataTopic(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.meta.Name
	mt.Topic = &name
	mt.TopicID = t.meta.ID
	for _, p := range t.partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.index
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = int32(p.leaderEpoch())
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
