package broker

// DescribeConfigs (key 32), AlterConfigs (key 33) and
// IncrementalAlterConfigs (key 44) for topic configs. Broker configs are
// static (flags and the config file): they describe as an empty set and
// cannot be altered over the protocol.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeConfigs(b *Broker, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeConfigsRequest)
	resp := newResponse(req).(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := b.lookupTopic(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = describeTopicConfigs(t.meta.Configs, rr.ConfigNames, r.IncludeDocumentation)
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("this is broker %d", b.cfg.NodeID))
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("resource type %d is not supported", rr.ResourceType))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

func describeTopicConfigs(explicit map[string]string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := func(string) bool { return true }
	if names != nil {
		set := make(map[string]bool, len(names))
		for _, n := range names {
			set[n] = true
		}
		want = func(k string) bool { return set[k] }
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, key := range topicConfigKeys() {
		if !want(key) {
			continue
		}
		def := topicConfigDefs[key]
		value, isDefault := effectiveConfig(explicit, key)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = key
		c.Value = kmsg.StringPtr(value)
		c.IsDefault = isDefault
		c.Source = kmsg.ConfigSourceDynamicTopicConfig
		if isDefault {
			c.Source = kmsg.ConfigSourceDefaultConfig
		}
		switch def.kind {
		case kindLong:
			c.ConfigType = kmsg.ConfigTypeLong
		case kindInt:
			c.ConfigType = kmsg.ConfigTypeInt
		case kindBool:
			c.ConfigType = kmsg.ConfigTypeBoolean
		default:
			c.ConfigType = kmsg.ConfigTypeString
		}
		if docs {
			c.Documentation = kmsg.StringPtr(def.doc)
		}
		out = append(out, c)
	}
	return out
}

// handleAlterConfigs replaces the whole set of a topic's explicit configs.
func handleAlterConfigs(b *Broker, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterConfigsRequest)
	resp := newResponse(req).(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.alterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
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
func handleIncrementalAlterConfigs(b *Broker, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := newResponse(req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.alterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
				for _, c := range rr.Configs {
					switch c.Op {
					case kmsg.IncrementalAlterConfigOpSet:
						if c.Value == nil {
							return invalidConfig("config %s: null value", c.Name)
						}
						configs[c.Name] = *c.Value
					case kmsg.IncrementalAlterConfigOpDelete:
						if _, ok := topicConfigDefs[c.Name]; !ok {
							return invalidConfig("unknown topic config %q", c.Name)
						}
						delete(configs, c.Name)
					default:
						return invalidConfig("config %s: operation %v applies only to list configs", c.Name, c.Op)
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
	return fmt.Errorf("%w: only topic configs can be altered; broker configs are static", errInvalidRequest)
}

func errorAndMessage(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return errorCode(err), kmsg.StringPtr(err.Error())
}
