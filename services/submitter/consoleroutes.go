package submitter

import (
	"net/http"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/submitter/console"
)

// consoleRoutes mounts the web console (its static files, open like
// /livez: they hold no data, which the pages fetch with the operator's
// key) and GET /v1/whoami, which tells the console whose key it holds.
func (s *Submitter) consoleRoutes(mux *http.ServeMux) {
	ui, err := console.New()
	if err != nil {
		// The embedded files are fixed when the binary is built, and the
		// console's tests load them: this cannot fail in a tested build.
		panic(err)
	}
	mux.Handle("GET "+console.Prefix, ui)
	toConsole := http.RedirectHandler(console.Prefix, http.StatusFound)
	mux.Handle("GET /ui", toConsole)
	mux.Handle("GET /{$}", toConsole)
	mux.HandleFunc("GET /v1/whoami", s.handleWhoAmI)
}

// handleWhoAmI names the request's key. Without auth no middleware put a
// key in the context; with auth every request here carries one, since the
// route is not open.
func (s *Submitter) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	k := auth.FromContext(r.Context())
	if k == nil {
		writeJSON(w, http.StatusOK, contracts.Caller{})
		return
	}
	writeJSON(w, http.StatusOK, contracts.Caller{Auth: true, Name: k.Name, Role: string(k.Role)})
}
