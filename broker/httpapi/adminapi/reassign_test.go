package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// fakeBackend is the part of Backend the reassignment routes use.
type fakeBackend struct{ Backend }

func (fakeBackend) DecodeJSON(_ http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.BadRequest("malformed JSON: %v", err)
	}
	return nil
}

func (fakeBackend) WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	var e *apierr.Error
	if !errors.As(err, &e) {
		e = apierr.Errorf(http.StatusInternalServerError, "internal", "%v", err)
	}
	apierr.Write(w, e)
}

func (fakeBackend) NodeID() int32                      { return 1 }
func (fakeBackend) Topic(string) ([16]byte, int, bool) { return [16]byte{}, 0, false }
func (fakeBackend) ForceUnclean(context.Context, node.PartitionKey) (bool, error) {
	return false, nil
}

// fakeReassigner answers as the cluster role does: errors wrapping meta's
// sentinels.
type fakeReassigner struct{ err error }

func (f fakeReassigner) RequestReassignment(_ context.Context, topic string, n int32, target []int32) (meta.Reassignment, error) {
	return meta.Reassignment{Partition: n, Target: target, Original: []int32{1, 2, 3}}, f.err
}

func (f fakeReassigner) CancelReassignment(_ context.Context, topic string, n int32) (meta.Reassignment, error) {
	return meta.Reassignment{Partition: n, Target: []int32{1, 2, 3}, Original: []int32{1, 2, 3}, Cancelled: true}, f.err
}

func (f fakeReassigner) ListReassignments(context.Context) ([]meta.ReassignmentStatus, error) {
	return []meta.ReassignmentStatus{{Topic: "orders", Target: []int32{1, 2, 4}, Phase: "catching-up"}}, f.err
}

// stdMux is a Mux over an http.ServeMux.
type stdMux struct{ *http.ServeMux }

func (m stdMux) HandleFunc(pattern string, h http.HandlerFunc) { m.ServeMux.HandleFunc(pattern, h) }

func serve(t *testing.T, r any, method, path, body string) (int, string) {
	t.Helper()
	mux := http.NewServeMux()
	New(fakeBackend{}, zerolog.Nop()).WithReassign(r).Register(stdMux{mux})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// Each route maps the cluster role's answers to its status and error code;
// without a Reassigner (a broker wired without one) they answer 501.
func TestReassignRoutes(t *testing.T) {
	const path = "/v1/admin/partitions/orders/0/reassign"
	for _, c := range []struct {
		name         string
		r            any
		method, path string
		body         string
		status       int
		bodyHas      string
	}{
		{"stored", fakeReassigner{}, "POST", path, `{"replicas":[1,2,4]}`, 202, `"target":[1,2,4]`},
		{"cancelled", fakeReassigner{}, "DELETE", path, ``, 202, `"cancelled":true`},
		{"listed", fakeReassigner{}, "GET", "/v1/admin/reassignments", ``, 200, `"phase":"catching-up"`},
		{"no replicas", fakeReassigner{}, "POST", path, `{}`, 400, `needs \"replicas\"`},
		{"unknown field", fakeReassigner{}, "POST", path, `{"replica":[1]}`, 400, "bad_request"},
		{"bad partition", fakeReassigner{}, "POST", "/v1/admin/partitions/orders/-1/reassign", `{"replicas":[1]}`, 400, "not a partition number"},
		{"rule broken", fakeReassigner{fmt.Errorf("%w: brokers 3 and 4 are both in AZ \"c\"", meta.ErrInvalidReassignment)}, "POST", path, `{"replicas":[1,3,4]}`, 400, "invalid_reassignment"},
		{"no partition", fakeReassigner{fmt.Errorf("x: %w", meta.ErrPartitionNotFound)}, "POST", path, `{"replicas":[1,2,4]}`, 404, "unknown_topic_or_partition"},
		{"nothing to cancel", fakeReassigner{fmt.Errorf("x: %w", meta.ErrNoReassignment)}, "DELETE", path, ``, 404, "no_reassignment"},
		{"etcd down", fakeReassigner{errors.New("context deadline exceeded")}, "POST", path, `{"replicas":[1,2,4]}`, 503, "metadata_unavailable"},
		{"list with etcd down", fakeReassigner{errors.New("context deadline exceeded")}, "GET", "/v1/admin/reassignments", ``, 503, "metadata_unavailable"},
		{"not wired", nil, "POST", path, `{"replicas":[1,2,4]}`, 501, "not_implemented"},
		{"not wired list", struct{}{}, "GET", "/v1/admin/reassignments", ``, 501, "not_implemented"},
	} {
		status, body := serve(t, c.r, c.method, c.path, c.body)
		if status != c.status || !strings.Contains(body, c.bodyHas) {
			t.Errorf("%s: %d %s, want %d holding %s", c.name, status, body, c.status, c.bodyHas)
		}
	}
}
