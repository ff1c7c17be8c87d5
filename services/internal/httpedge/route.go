package httpedge

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"

	"github.com/axsched/ax/contracts"
)

// routes answers requests that match no route of mux as problem+json, where
// the mux would answer text/plain: 404 not_found for an unknown path, 405
// method_not_allowed (with the mux's Allow header) for a known path with
// another method. Matched requests go on to next.
func routes(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			next.ServeHTTP(w, r)
			return
		}
		// No pattern: the mux's own not-found, method-not-allowed or
		// path-cleaning redirect. Run it aside to learn which.
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusNotFound:
			WriteProblem(w, contracts.NewProblem(http.StatusNotFound, contracts.CodeNotFound,
				fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			WriteProblem(w, contracts.NewProblem(http.StatusMethodNotAllowed, contracts.CodeMethodNotAllowed,
				fmt.Sprintf("%s does not answer %s: allowed are %s", r.URL.Path, r.Method, rec.header.Get("Allow"))))
		default:
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			_, _ = w.Write(rec.body.Bytes())
		}
	})
}

// recorder keeps the answer of one of the mux's small built-in handlers.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// requireJSON refuses a state-changing request (POST, PUT, PATCH, DELETE)
// unless it says Content-Type: application/json, whether it has a body or
// not. A browser sends such a request cross-site only after a CORS
// preflight, which cors refuses for unknown origins; without this rule a
// plain HTML form, or a bodyless fetch, could create or cancel tasks.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			ct := r.Header.Get("Content-Type")
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				WriteProblem(w, contracts.NewProblem(http.StatusUnsupportedMediaType, contracts.CodeUnsupportedMediaType,
					fmt.Sprintf("%s needs Content-Type: application/json, with or without a body; got %q", r.Method, ct)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
