package kafka

// Metadata (key 3): brokers, the controller, and topics with their
// partitions, leaders and leader epochs. Topics named in the request are
// created on first use when auto-creation is on, as in Kafka.
//
// Leader and leader epoch come from the partition state in etcd; a state
// whose leader is not live answers leader -1 with LEADER_NOT_AVAILABLE. The
// ISR is the leader's own view when this broker leads the partition (the
// replicas that fetched within the lag window), and otherwise the set that
// the partition's leader published for its epoch (isr_publish.go), or the
// live replicas while there is none; the offline replicas are the replicas
// not live.

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
)

func handleMetadata(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.MetadataRequest)
	resp := newResponse(req).(*kmsg.MetadataResponse)

	resp.Brokers = b.metadataBrokers(req)
	clusterID := b.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = b.ControllerID()

	// v0 asks for every topic with an empty list; later versions with null.
	all := r.Topics == nil || (req.version == 0 && len(r.Topics) == 0)
	if all {
		for _, t := range b.SortedTopics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		return done(resp), nil
	}
	allowCreate := b.Cfg.AutoCreateTopics && (req.version < 4 || r.AllowAutoTopicCreation)
	for _, rt := range r.Topics {
		var t *node.Topic
		name := ""
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
			t = b.LookupTopic(name)
		case rt.TopicID != [16]byte{}:
			t = b.LookupTopicID(rt.TopicID)
		}
		if t == nil && rt.Topic != nil {
			if err := node.ValidateQualifiedTopicName(name); err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(rt, kerr.InvalidTopicException.Code))
				continue
			}
			if allowCreate {
				var err error
				t, err = b.AutoCreate(ctx, name)
				if node.QuotaRefusal(err) { // the tenant's limit: the client's to see
					resp.Topics = append(resp.Topics, metadataTopicError(rt, node.ErrorCode(err)))
					continue
				}
				if err != nil && !errors.Is(err, node.ErrUnknownTopic) {
					b.Logger.Warn().Err(err).Str("topic", name).Msg("auto-create topic")
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

// metadataBrokers lists the live brokers with their AZ as the rack; this
// broker alone before its registration is known. Each broker is named by
// its address on the listener req came in on (Kafka's rule), and left out
// if it has no such listener. Asked on the inter-broker listener (by
// another broker's forwarding producer), it names their inter-broker
// addresses instead.
func (b *Server) metadataBrokers(req *request) []kmsg.MetadataResponseBroker {
	live := b.Brokers()
	if len(live) == 0 {
		live = []meta.BrokerInfo{{NodeID: b.Cfg.NodeID, AZ: b.Cfg.AZ, Kafka: b.Advertise(), InterBroker: b.ib.advertise}}
	}
	out := make([]kmsg.MetadataResponseBroker, 0, len(live))
	for _, bi := range live {
		addr := b.listenerAddress(bi.NodeID, bi.Kafka, bi.Listeners, req.listener)
		if req.interBroker {
			addr = bi.InterBroker
		}
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			continue // Register validated it
		}
		port, _ := strconv.Atoi(portStr)
		rack := bi.AZ
		out = append(out, kmsg.MetadataResponseBroker{NodeID: bi.NodeID, Host: host, Port: int32(port), Rack: &rack})
	}
	return out
}

func metadataTopicError(rt kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = rt.Topic
	t.TopicID = rt.TopicID
	t.ErrorCode = code
	return t
}

func (b *Server) metadataTopic(t *node.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Meta.Name
	mt.Topic = &name
	mt.TopicID = t.Meta.ID
	live := make(map[int32]bool)
	for _, bi := range b.Brokers() {
		live[bi.NodeID] = true
	}
	if len(live) == 0 {
		live[b.Cfg.NodeID] = true // alone before its registration is known
	}
	for i, st := range t.States {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = st.Leader
		mp.LeaderEpoch = st.LeaderEpoch
		mp.Replicas = slices.Clone(st.Replicas)
		leading := false
		if i < len(t.Partitions) && t.Partitions[i] != nil {
			if rs := t.Partitions[i].ReplicaStatus(); rs.Role == replica.RoleLeader {
				leading, mp.ISR = true, []int32{}
				for _, id := range st.Replicas {
					if slices.Contains(rs.InSync, replica.NodeID(id)) {
						mp.ISR = append(mp.ISR, id)
					}
				}
			}
		}
		if !leading {
			mp.ISR = b.ReportedInSync(st, live)
		}
		for _, id := range st.Replicas {
			if !live[id] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if st.Leader < 0 || !live[st.Leader] {
			// Clients wait and ask again rather than route to a dead broker.
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
