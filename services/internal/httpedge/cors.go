package httpedge

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/axsched/ax/contracts"
)

// CORS answers of an allowed origin.
const (
	corsMethods = "GET, POST, PUT"
	corsHeaders = "Authorization, Content-Type"
	corsMaxAge  = 10 * 60 // seconds a browser may cache a preflight answer
)

// cors lets pages of the allowed origins call the API: their requests get
// Access-Control-Allow-Origin, their preflights an answer. A preflight from
// any other origin is refused, so a browser never sends the request it
// announces; with no origins configured, that is every preflight.
func cors(origins []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := origin != "" && slices.Contains(origins, origin)
		if len(origins) > 0 {
			w.Header().Add("Vary", "Origin")
		}
		preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
		switch {
		case preflight && !allowed:
			WriteProblem(w, contracts.NewProblem(http.StatusForbidden, contracts.CodeOriginNotAllowed,
				fmt.Sprintf("origin %q may not call this API from a browser: see --cors-origins", origin)))
		case preflight:
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
			w.WriteHeader(http.StatusNoContent)
		default:
			if allowed {
				w.Header().Set("Access-Control-Allow-Origin", origin)
				w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
			}
			next.ServeHTTP(w, r)
		}
	})
}
