package secapi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
)

// FuzzDecodeRequests feeds outside bytes to the decoding of every request
// body and to the parsing of ACL bindings and filters: nothing panics,
// every refusal is a 4xx *apierr.Error, and a binding that parses prints to a
// form that parses again to the same binding.
func FuzzDecodeRequests(f *testing.F) {
	for _, seed := range []string{
		`{"name":"acme"}`,
		`{"name":"acme","pool":"gold"}`,
		`{"name":"alice","tenant":"acme","password":"pw","role":"tenant-admin","mechanisms":["SCRAM-SHA-512"]}`,
		`{"password":"x"}`,
		`{"description":"ci"}`,
		`{"tenant":"acme","bindings":[{"resource_type":"topic","resource_name":"orders","pattern_type":"prefixed","principal":"User:alice","host":"::ffff:10.0.0.1","operation":"read","permission":"allow"}]}`,
		`{"bindings":[{"resource_type":"cluster","principal":"User:*","operation":"idempotent-write","permission":"deny"}]}`,
		`{"filter":{"resource_type":"any","resource_name":"orders","pattern_type":"match"}}`,
		`{"filter":{}}`,
		`{"bindings":[{"tenant":"x"}]} trailing`,
		`[]`, `"s"`, `{"name":7}`, `{"mechanisms":"x"}`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		refusal := func(err error) {
			t.Helper()
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status < 400 || ae.Status > 499 || ae.Code == "" || ae.Message == "" {
				t.Fatalf("refusal %v (%T) is not a 4xx with a code and message", err, err)
			}
		}
		for _, v := range []any{&CreateTenantRequest{}, &CreateUserRequest{}, &SetPasswordRequest{}, &CreateAPIKeyRequest{}, &SetTenantPoolRequest{}} {
			if err := decodeBody(bytes.NewReader(body), v); err != nil {
				refusal(err)
			}
		}
		var sp SetTenantPoolRequest
		if decodeBody(bytes.NewReader(body), &sp) == nil {
			if err := validPool(sp.Pool); err != nil {
				refusal(err)
			}
		}
		var cu CreateUserRequest
		if decodeBody(bytes.NewReader(body), &cu) == nil {
			if _, err := parseRole(cu.Role); err != nil {
				refusal(err)
			}
			if _, err := parseMechanisms(cu.Mechanisms); err != nil {
				refusal(err)
			}
		}
		var ca CreateACLsRequest
		if err := decodeBody(bytes.NewReader(body), &ca); err != nil {
			refusal(err)
		} else {
			for _, in := range ca.Bindings {
				b, err := parseBinding(in, "bindings[0]", "acme")
				if err != nil {
					refusal(err)
					continue
				}
				again, err := parseBinding(bindingOut(b), "bindings[0]", "acme")
				if err != nil || again != b {
					t.Fatalf("binding %+v printed as %+v parses to %+v, %v", b, bindingOut(b), again, err)
				}
			}
		}
		var da DeleteACLsRequest
		if err := decodeBody(bytes.NewReader(body), &da); err != nil {
			refusal(err)
		} else if da.Filter != nil {
			if fl, err := parseFilter(*da.Filter, "filter."); err != nil {
				refusal(err)
			} else if fl.Tenant = "acme"; fl.Validate() != nil {
				t.Fatalf("parsed filter %+v does not validate: %v", fl, fl.Validate())
			}
		}
	})
}
