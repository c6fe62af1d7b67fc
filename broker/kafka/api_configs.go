package kafka

// DescribeConfigs (key 32), AlterConfigs (key 33) and
// IncrementalAlterConfigs (key 44) for topic configs. Broker configs are
// static (flags and the config file): a named broker describes its settings
// under Kafka's names (node.BrokerConfigEntries), read-only; the cluster-wide
// default resource (empty name) describes as Kafka's dynamic defaults, which
// Sluice has none of; nothing broker-level can be altered over the protocol.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleDescribeConfigs(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeConfigsRequest)
	resp := newResponse(req).(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := b.LookupTopic(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = node.DescribeTopicConfigs(t.Meta.Configs, t.Meta.ReplicationFactor, b.Cfg.TopicDefaults(), rr.ConfigNames, r.IncludeDocumentation)
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.Cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("this is broker %d", b.Cfg.NodeID))
				break
			}
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker && rr.ResourceName != "" {
				auto := controller.DefaultReplicationFactor(b.PlacementBrokers())
				sr.Configs = node.DescribeBrokerConfigs(node.BrokerConfigEntries(b.Cfg, auto), rr.ConfigNames, r.IncludeSynonyms, r.IncludeDocumentation)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("resource type %d is not supported", rr.ResourceType))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

// handleAlterConfigs replaces the whole set of a topic's explicit configs.
func handleAlterConfigs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterConfigsRequest)
	resp := newResponse(req).(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.AlterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
				clear(configs)
				for _, c := range rr.Configs {
					if c.Value == nil {
						continue // a null value leaves the key at its default
					}
					configs[c.Name] = *c.Value
				}
				return nil
			})
		}
		sr.ErrorCode, sr.ErrorMessage = errorAndMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

// handleIncrementalAlterConfigs sets, deletes, appends to or subtracts from
// single keys.
func handleIncrementalAlterConfigs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := newResponse(req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.AlterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
				for _, c := range rr.Configs {
					switch c.Op {
					case kmsg.IncrementalAlterConfigOpSet:
						if c.Value == nil {
							return node.InvalidConfig("config %s: null value", c.Name)
						}
						configs[c.Name] = *c.Value
					case kmsg.IncrementalAlterConfigOpDelete:
						if _, ok := node.TopicConfigDefs[c.Name]; !ok {
							return node.InvalidConfig("unknown topic config %q", c.Name)
						}
						delete(configs, c.Name)
					default:
						return node.InvalidConfig("config %s: operation %v applies only to list configs", c.Name, c.Op)
					}
				}
				return nil
			})
		}
		sr.ErrorCode, sr.ErrorMessage = errorAndMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

func checkAlterResource(t kmsg.ConfigResourceType) error {
	if t == kmsg.ConfigResourceTypeTopic {
		return nil
	}
	return fmt.Errorf("%w: only topic configs can be altered; broker configs are static", node.ErrInvalidRequest)
}

func errorAndMessage(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return node.ErrorCode(err), kmsg.StringPtr(err.Error())
}
