package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/axsched/ax/contracts"
)

// Middleware checks every request routed by mux against Routes before
// next serves it. Requests mux does not route (404, 405) pass through, so
// that mux answers them; a routed pattern missing from Routes is refused.
// A verified key travels in the request's context (FromContext, KeyName).
func Middleware(mux *http.ServeMux, a *Authenticator, logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, pattern := mux.Handler(r)
			if pattern == "" {
				next.ServeHTTP(w, r)
				return
			}
			rule, ok := Routes[pattern]
			if !ok {
				logger.Error("route has no rule in auth.Routes; refused", "pattern", pattern)
				writeProblem(w, http.StatusForbidden, contracts.CodeForbidden, "this route declares no role, so no key may call it")
				return
			}
			if rule.Open {
				next.ServeHTTP(w, r)
				return
			}
			k, err := a.Verify(r.Context(), bearer(r))
			switch {
			case errors.Is(err, ErrNoToken), errors.Is(err, ErrUnknownToken), errors.Is(err, ErrRevoked), errors.Is(err, ErrExpired):
				w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
				writeProblem(w, http.StatusUnauthorized, contracts.CodeUnauthenticated, err.Error())
				return
			case err != nil:
				logger.Error("verify api key failed", "err", err)
				writeProblem(w, http.StatusServiceUnavailable, contracts.CodeUnavailable, "API keys cannot be read now")
				return
			}
			if !rule.Allows(k.Role) {
				writeProblem(w, http.StatusForbidden, contracts.CodeForbidden,
					fmt.Sprintf("API key %s has role %s; %s needs %s", k.Name, k.Role, pattern, rule.Role))
				return
			}
			next.ServeHTTP(w, r.WithContext(WithKey(r.Context(), k)))
		})
	}
}

// bearer returns the token of an "Authorization: Bearer" header, or "".
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", contracts.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(contracts.Problem{Type: "urn:ax:error:" + code, Title: http.StatusText(status),
		Status: status, Detail: detail, Code: code})
}
