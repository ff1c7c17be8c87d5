package submitter

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/store"
)

// deadLetterRoutes mounts the dead-letter (manual intervention) API.
func (s *Submitter) deadLetterRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/deadletters", s.handleListDeadLetters)
	mux.HandleFunc("POST /v1/deadletters/{id}/retry", s.handleRetryDeadLetter)
}

func deadLetterAPI(d *store.DeadLetter) contracts.DeadLetter {
	return contracts.DeadLetter{
		ID: strconv.FormatInt(d.ID, 10), TaskID: strconv.FormatInt(d.TaskID, 10), Type: d.Type,
		Status: d.Status, Attempt: d.Attempt, RetryCount: d.RetryCount, LastError: d.LastError,
		CreatedAt: d.CreatedAt, RetriedAt: d.RetriedAt, RetriedBy: d.RetriedBy,
	}
}

func (s *Submitter) handleListDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := store.DeadLetterQuery{Type: r.URL.Query().Get("type")}
	switch v := r.URL.Query().Get("all"); v {
	case "", "false":
	case "true":
		q.All = true
	default:
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("all=%q: want true or false", v))
		return
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("limit=%q: want 1..1000", v))
			return
		}
		q.Limit = n
	}
	if v := r.URL.Query().Get("task_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("task_id=%q: want a task id", v))
			return
		}
		q.TaskID = n
	}
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("before=%q: want a dead letter id", v))
			return
		}
		q.BeforeID = n
	}
	rows, err := s.store.ListDeadLetters(r.Context(), q)
	if err != nil {
		s.internal(w, "list dead letters", err)
		return
	}
	out := contracts.DeadLetterList{DeadLetters: make([]contracts.DeadLetter, len(rows))}
	for i := range rows {
		out.DeadLetters[i] = deadLetterAPI(&rows[i])
	}
	limit := q.Limit
	if limit == 0 {
		limit = 100
	}
	if len(rows) == limit {
		out.NextBefore = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxActorNote bounds ?actor=, which shares the history row's 255-byte
// actor column with the key's name and the submitter's.
const maxActorNote = 100

// handleRetryDeadLetter re-runs a dead letter's task. The actor of record
// is the request's API key (via this submitter); the caller's ?actor= (who
// pressed the button) is only added as a note, since anybody may write
// anything there. It is written to the task's history.
func (s *Submitter) handleRetryDeadLetter(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no dead letter %q: ids are positive integers", raw))
		return
	}
	note := r.URL.Query().Get("actor")
	if len(note) > maxActorNote {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("actor is longer than %d bytes", maxActorNote))
		return
	}
	actor := auth.WithNote(s.actor(r.Context()), note)
	d, err := s.store.RetryDeadLetter(r.Context(), id, actor, s.clock.Now().UnixMilli())
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no dead letter %d", id))
	case errors.Is(err, store.ErrAlreadyRetried), errors.Is(err, store.ErrConflict):
		writeProblem(w, http.StatusConflict, contracts.CodeIllegalTransition, err.Error())
	case err != nil:
		s.internal(w, "retry dead letter", err)
	default:
		writeJSON(w, http.StatusOK, deadLetterAPI(d))
	}
}
