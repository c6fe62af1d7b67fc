package s3fault

// classify.go owns the mapping from an HTTP request to the S3 operation it
// is, for path-style addressing (/bucket/key), the only style a client can
// use against a proxy on 127.0.0.1:PORT.
//
// Invariant: a request is given a faultable operation only when every query
// parameter is one that operation takes; anything with another parameter (a
// subresource such as ?acl, ?tagging, ?uploads, ?versions) is OpOther and
// passes untouched, so a fault meant for object writes never hits an ACL
// change or a multipart control call.

import (
	"net/http"
	"net/url"
	"strings"
)

// Query parameters each operation may carry, beyond the ones any request
// may (see anyParam).
var (
	objectReadParams = map[string]bool{"versionId": true, "partNumber": true}
	objectPutParams  = map[string]bool{"partNumber": true, "uploadId": true} // UploadPart is a PUT of bytes
	objectDelParams  = map[string]bool{"versionId": true}
	listParams       = map[string]bool{
		"list-type": true, "prefix": true, "delimiter": true, "marker": true, "max-keys": true,
		"continuation-token": true, "start-after": true, "fetch-owner": true, "encoding-type": true,
	}
	batchDeleteParams = map[string]bool{"delete": true}
)

// anyParam reports parameters that do not change the operation: the SDK's
// x-id, response header overrides, and presigned-URL signature fields.
func anyParam(k string) bool {
	return k == "x-id" || strings.HasPrefix(k, "response-") ||
		strings.HasPrefix(strings.ToLower(k), "x-amz-")
}

// onlyParams reports whether every parameter of q is in allowed or anyParam.
func onlyParams(q url.Values, allowed map[string]bool) bool {
	for k := range q {
		if !allowed[k] && !anyParam(k) {
			return false
		}
	}
	return true
}

// classify returns the operation of r.
func classify(r *http.Request) Op {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket == "" {
		return OpOther // ListBuckets and the like
	}
	q := r.URL.Query()
	if key == "" {
		switch {
		case r.Method == http.MethodGet && onlyParams(q, listParams):
			return OpList
		case r.Method == http.MethodPost && q.Has("delete") && onlyParams(q, batchDeleteParams):
			return OpDelete
		}
		return OpOther
	}
	switch r.Method {
	case http.MethodGet:
		if !onlyParams(q, objectReadParams) {
			return OpOther
		}
		if r.Header.Get("Range") != "" {
			return OpRangedGet
		}
		return OpGet
	case http.MethodHead:
		if onlyParams(q, objectReadParams) {
			return OpHead
		}
	case http.MethodPut:
		if onlyParams(q, objectPutParams) {
			return OpPut
		}
	case http.MethodDelete:
		if onlyParams(q, objectDelParams) {
			return OpDelete
		}
	}
	return OpOther
}
