// Package objapi is the HTTP API of large payloads: upload sessions and
// object downloads over broker/largeobj. It does not authenticate or
// authorise: the pipeline (broker/httpapi) did, put an auth.Identity in the
// request's context, and for POST /v1/uploads checked WRITE on the body's
// topic and rewrote it to the tenant's internal name. A session belongs to
// the identity's tenant; another tenant's session or object is answered
// 404 exactly as one that does not exist.
//
// # Routes
//
//	POST   /v1/uploads                {topic,size,sha256,content_type?,       201 Session
//	                                   enc_key_id?,enc_alg?}
//	PUT    /v1/uploads/{id}           the bytes; Content-Range: bytes a-b/total 200 {id,received,size}
//	POST   /v1/uploads/{id}:complete                                          200 Completed
//	DELETE /v1/uploads/{id}                                                   204
//	GET    /v1/objects/{ref}          Range: bytes=a-b | a- | -n (optional)   200 | 206 the bytes
//
// A PUT's range must start at the bytes received so far and its length be
// a multiple of part_size unless it ends the payload (see broker/largeobj);
// a PUT without Content-Range is the whole payload in one request. Its
// bytes are streamed to the object store, never held whole.
//
// # Errors
//
// {"error":{"code","message"}} with:
//
//	400 bad_request         a malformed body, Content-Range or Range
//	404 not_found           no such session or object (or another tenant's),
//	                        or no such topic
//	409 wrong_state         the session's state forbids the call
//	409 out_of_order        a range that does not start where the bytes end
//	409 conflict            another broker changed the session; retry
//	410 expired             the session passed its time to live
//	413 too_large           a declared size above --max-object-bytes
//	416 range_not_satisfiable
//	507 quota_exceeded      POST /v1/uploads or :complete: the object does
//	                        not fit the tenant's object_storage_bytes or
//	                        storage_bytes (broker/largeobj/quota.go); the
//	                        message names the key
//	422 checksum_mismatch   the bytes are not the size and sha256 declared;
//	                        the session is aborted and the bytes deleted
//	503 unavailable         the object or metadata store failed; retry
package objapi
