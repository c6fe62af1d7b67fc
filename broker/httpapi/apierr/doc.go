// Package apierr is the one error answer of the broker's HTTP API and its
// sub-packages (httpapi, objapi, queueapi, secapi): a failure with its
// HTTP status and a stable code, written as
//
//	HTTP/1.1 <status>
//	Content-Type: application/json
//
//	{
//	  "error": {
//	    "code": "bad_request",
//	    "message": "text for a person"
//	  }
//	}
//
// and logged once: a client's mistake (4xx, and 499 for a caller that went
// away) at DEBUG, since the client is told and the operator's log is not
// the place for it; 500 at ERROR (a failure of the broker's own); any other
// 5xx (503: retry) at WARN. Each package maps its own failures to an Error
// and names its log line; this package shapes and writes the answer, and
// decodes a JSON request body so that every route refuses a bad one in the
// same words (Decode: field names and JSON types, never Go's).
package apierr
