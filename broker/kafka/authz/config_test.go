package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
)

// TestConfigRules: the three config APIs keep the resources the identity
// may touch in the request and answer the others refused, a topic with
// TOPIC_AUTHORIZATION_FAILED, a broker with CLUSTER_AUTHORIZATION_FAILED.
func TestConfigRules(t *testing.T) {
	c := &Check{Allow: func(op acl.Operation, rt acl.ResourceType, name string) bool {
		return rt == acl.ResourceTopic && name == "open"
	}}
	res := func(rt kmsg.ConfigResourceType, name string) (kmsg.ConfigResourceType, string) { return rt, name }
	type item struct {
		rt   kmsg.ConfigResourceType
		name string
	}
	for _, tc := range []struct {
		name    string
		rule    Rule
		build   func([]item) kmsg.Request
		kept    func(kmsg.Request) []string
		refused func(kmsg.Response) map[string]int16
		resp    kmsg.Response
	}{
		{"DescribeConfigs", DescribeConfigs,
			func(is []item) kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				for _, i := range is {
					x := kmsg.NewDescribeConfigsRequestResource()
					x.ResourceType, x.ResourceName = res(i.rt, i.name)
					r.Resources = append(r.Resources, x)
				}
				return r
			},
			func(b kmsg.Request) (out []string) {
				for _, x := range b.(*kmsg.DescribeConfigsRequest).Resources {
					out = append(out, x.ResourceName)
				}
				return out
			},
			func(r kmsg.Response) map[string]int16 {
				out := map[string]int16{}
				for _, x := range r.(*kmsg.DescribeConfigsResponse).Resources {
					out[x.ResourceName] = x.ErrorCode
				}
				return out
			}, kmsg.NewPtrDescribeConfigsResponse()},
		{"AlterConfigs", AlterConfigs,
			func(is []item) kmsg.Request {
				r := kmsg.NewPtrAlterConfigsRequest()
				for _, i := range is {
					x := kmsg.NewAlterConfigsRequestResource()
					x.ResourceType, x.ResourceName = res(i.rt, i.name)
					r.Resources = append(r.Resources, x)
				}
				return r
			},
			func(b kmsg.Request) (out []string) {
				for _, x := range b.(*kmsg.AlterConfigsRequest).Resources {
					out = append(out, x.ResourceName)
				}
				return out
			},
			func(r kmsg.Response) map[string]int16 {
				out := map[string]int16{}
				for _, x := range r.(*kmsg.AlterConfigsResponse).Resources {
					out[x.ResourceName] = x.ErrorCode
				}
				return out
			}, kmsg.NewPtrAlterConfigsResponse()},
		{"IncrementalAlterConfigs", IncrementalAlterConfigs,
			func(is []item) kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				for _, i := range is {
					x := kmsg.NewIncrementalAlterConfigsRequestResource()
					x.ResourceType, x.ResourceName = res(i.rt, i.name)
					r.Resources = append(r.Resources, x)
				}
				return r
			},
			func(b kmsg.Request) (out []string) {
				for _, x := range b.(*kmsg.IncrementalAlterConfigsRequest).Resources {
					out = append(out, x.ResourceName)
				}
				return out
			},
			func(r kmsg.Response) map[string]int16 {
				out := map[string]int16{}
				for _, x := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
					out[x.ResourceName] = x.ErrorCode
				}
				return out
			}, kmsg.NewPtrIncrementalAlterConfigsResponse()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.build([]item{{configResourceTopic, "open"}, {configResourceTopic, "secret"}, {configResourceBroker, "1"}})
			r := tc.rule(c, body)
			if r.Refused != nil || r.Merge == nil {
				t.Fatalf("result %+v: want a merge, no whole refusal", r)
			}
			if kept := tc.kept(body); len(kept) != 1 || kept[0] != "open" {
				t.Fatalf("the handler would see %v, want [open]", kept)
			}
			r.Merge(tc.resp)
			got := tc.refused(tc.resp)
			if len(got) != 2 || got["secret"] != kerr.TopicAuthorizationFailed.Code || got["1"] != kerr.ClusterAuthorizationFailed.Code {
				t.Fatalf("refused answers %v", got)
			}
		})
	}
}
