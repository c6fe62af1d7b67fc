package node

import "github.com/twmb/franz-go/pkg/kmsg"

// This file owns the description of a topic's configs as DescribeConfigs
// answers them (and the HTTP API lists them).

// describeTopicConfigs describes a topic with the explicit configs and
// replicationFactor replicas: each value in force, from the topic, the
// broker's flags or the built-in default (topicdefaults.go).
func DescribeTopicConfigs(explicit map[string]string, replicationFactor int16, defaults TopicDefaults, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := NameFilter(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, key := range TopicConfigKeys() {
		if !want(key) {
			continue
		}
		def := TopicConfigDefs[key]
		value, source := defaults.Enforced(explicit, replicationFactor, key)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = key
		c.Value = kmsg.StringPtr(value)
		c.Source = source
		c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
		c.ConfigType = TopicConfigType(def.Kind)
		if docs {
			c.Documentation = kmsg.StringPtr(def.Doc)
		}
		out = append(out, c)
	}
	return out
}

// nameFilter is DescribeConfigs' config name filter: nil wants every name.
func NameFilter(names []string) func(string) bool {
	if names == nil {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(k string) bool { return set[k] }
}

func TopicConfigType(k ConfigKind) kmsg.ConfigType {
	switch k {
	case KindLong:
		return kmsg.ConfigTypeLong
	case KindInt:
		return kmsg.ConfigTypeInt
	case KindBool:
		return kmsg.ConfigTypeBoolean
	default:
		return kmsg.ConfigTypeString
	}
}
