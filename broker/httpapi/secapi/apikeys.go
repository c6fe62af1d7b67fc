package secapi

// This file owns the API key routes: create (the key is in that answer and
// nowhere else, ever), list, delete.
//
// Invariant: no answer and no log line carries a key's hash; the key itself
// appears only in the body of the 201 that created it.

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// maxDescription bounds an API key's description (the store's limit).
const maxDescription = 1024

// APIKey is an API key as the API lists it: never the key or its hash.
type APIKey struct {
	ID          string `json:"id"`
	User        string `json:"user"`
	CreatedMs   int64  `json:"created_ms"`
	Description string `json:"description,omitempty"`
}

// NewAPIKey is the answer of POST /v1/users/{name}/api-keys: the key's
// listing and, this once, the key.
type NewAPIKey struct {
	APIKey
	Key string `json:"key"`
}

// APIKeyList is the answer of GET /v1/users/{name}/api-keys.
type APIKeyList struct {
	APIKeys []APIKey `json:"api_keys"`
}

// CreateAPIKeyRequest is the body of POST /v1/users/{name}/api-keys; the
// body may be left out.
type CreateAPIKeyRequest struct {
	Description string `json:"description,omitempty"`
}

func apiKeyOut(k meta.APIKey) APIKey {
	return APIKey{ID: k.ID, User: k.User, CreatedMs: k.Created.UnixMilli(), Description: k.Description}
}

func (a *api) createAPIKey(w http.ResponseWriter, r *http.Request) {
	const what = "create API key"
	u, c, err := a.targetUser(r, what, caller.mayActFor)
	var req CreateAPIKeyRequest
	if err == nil {
		err = decodeOptionalJSON(w, r, &req)
	}
	if err == nil {
		err = validDescription(req.Description)
	}
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	key, id, hash, err := auth.NewAPIKey()
	if err != nil {
		a.writeError(w, r, err, "API key")
		return
	}
	stored, err := a.store.CreateAPIKey(r.Context(), meta.APIKey{ID: id, User: u.Name, Hash: hash, Description: req.Description})
	if err != nil {
		a.writeError(w, r, err, "API key")
		return
	}
	a.log.Info().Str("api_key", id).Str("user", u.Name).Str("tenant", u.Tenant).
		Str("by", c.Principal.String()).Msg("API key created")
	writeJSON(w, http.StatusCreated, NewAPIKey{APIKey: apiKeyOut(stored), Key: key})
}

func validDescription(d string) error {
	switch {
	case len(d) > maxDescription:
		return badRequest("field description: %d bytes, at most %d", len(d), maxDescription)
	case !utf8.ValidString(d):
		return badRequest("field description: not valid UTF-8")
	}
	return nil
}

func (a *api) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	u, _, err := a.targetUser(r, "list API keys", caller.mayActFor)
	var ks []meta.APIKey
	if err == nil {
		ks, err = a.store.ListAPIKeys(r.Context(), u.Name)
	}
	if err != nil {
		a.writeError(w, r, err, "user")
		return
	}
	out := APIKeyList{APIKeys: make([]APIKey, 0, len(ks))}
	for _, k := range ks {
		out.APIKeys = append(out.APIKeys, apiKeyOut(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) deleteAPIKey(w http.ResponseWriter, r *http.Request) {
	const what = "delete API key"
	c, err := callerOf(r)
	id := r.PathValue("id")
	if err == nil {
		if verr := meta.ValidateAPIKeyID(id); verr != nil {
			err = badRequest("%s", strings.TrimPrefix(verr.Error(), "meta: invalid name: "))
		}
	}
	var k meta.APIKey
	if err == nil {
		k, err = a.store.GetAPIKey(r.Context(), id)
	}
	var u meta.User
	if err == nil {
		u, err = a.store.GetUser(r.Context(), k.User)
	}
	if err == nil {
		err = c.mayActFor(u, what)
	}
	if err == nil {
		err = a.store.DeleteAPIKey(r.Context(), id)
	}
	if err != nil {
		a.writeError(w, r, err, "API key")
		return
	}
	a.log.Info().Str("api_key", id).Str("user", u.Name).Str("tenant", u.Tenant).
		Str("by", c.Principal.String()).Msg("API key deleted")
	w.WriteHeader(http.StatusNoContent)
}
