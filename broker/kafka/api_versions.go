package kafka

// ApiVersions (key 18): the versions this broker serves. A request above
// the highest version is answered in v0 form with UNSUPPORTED_VERSION and
// the supported range of key 18, so the client can retry with a version it
// shares with us.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleApiVersions(b *Server, _ context.Context, req *request) (reply, error) {
	apis := apisOf(req)
	a := apis[apiVersionsKey]
	resp := &kmsg.ApiVersionsResponse{}
	if req.version > a.max || req.version < 0 {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: a.min, MaxVersion: a.max}}
		return done(resp), nil
	}
	resp.SetVersion(req.version)
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: apis[k].min, MaxVersion: apis[k].max})
	}
	return done(resp), nil
}
