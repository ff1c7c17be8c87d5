package submitter

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/store"
)

// keyBodyLimit bounds a POST /v1/keys body; a valid one is under 200 bytes.
const keyBodyLimit = 4 << 10

// keyRoutes mounts the API key administration API (role admin). The first
// admin key is made with `ax key create`, which needs no key.
func (s *Submitter) keyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/keys", s.handleListKeys)
	mux.HandleFunc("POST /v1/keys", s.handleCreateKey)
	mux.HandleFunc("DELETE /v1/keys/{name}", s.handleRevokeKey)
}

// apiKeyAPI converts a stored key for the API; the hash never leaves.
func apiKeyAPI(k *store.APIKey) contracts.APIKey {
	return contracts.APIKey{Name: k.Name, Role: k.Role, Prefix: k.Prefix, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

func (s *Submitter) handleListKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.store.ListAPIKeys(r.Context())
	if err != nil {
		s.internal(w, "list api keys", err)
		return
	}
	out := contracts.APIKeyList{Keys: make([]contracts.APIKey, len(keys))}
	for i := range keys {
		out.Keys[i] = apiKeyAPI(&keys[i])
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Submitter) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var req contracts.APIKeyCreate
	if p := decodeJSON(w, r, keyBodyLimit, &req); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	role, err := auth.ParseRole(req.Role)
	if err == nil {
		err = auth.ValidateName(req.Name)
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, err.Error())
		return
	}
	var expires *time.Time
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
				fmt.Sprintf("expires_in %q must be a positive duration like \"720h\"", req.ExpiresIn))
			return
		}
		at := s.clock.Now().Add(d)
		expires = &at
	}
	tok, k, err := auth.CreateKey(r.Context(), s.store, req.Name, role, expires)
	switch {
	case errors.Is(err, store.ErrNameTaken):
		writeProblem(w, http.StatusConflict, contracts.CodeConflict, fmt.Sprintf("an API key named %q exists (names are never reused, even revoked ones)", req.Name))
		return
	case err != nil:
		s.internal(w, "create api key", err)
		return
	}
	s.logger.Info("api key created", "api_key", k.Name, "role", k.Role, "by", s.actor(r.Context()))
	writeJSON(w, http.StatusCreated, contracts.APIKeyCreated{Key: apiKeyAPI(k), Token: tok.Secret})
}

func (s *Submitter) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	k, err := s.store.RevokeAPIKey(r.Context(), name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no API key named %q", name))
	case errors.Is(err, store.ErrRevoked):
		writeProblem(w, http.StatusConflict, contracts.CodeConflict, fmt.Sprintf("API key %q is already revoked", name))
	case err != nil:
		s.internal(w, "revoke api key", err)
	default:
		s.logger.Info("api key revoked", "api_key", k.Name, "by", s.actor(r.Context()))
		writeJSON(w, http.StatusOK, apiKeyAPI(k))
	}
}
