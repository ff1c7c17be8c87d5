package submitter

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// typeBodyLimit bounds a PUT /v1/types/{name} body; the largest valid one is
// a few hundred bytes.
const typeBodyLimit = 16 << 10

// typeRoutes mounts the task type API.
func (s *Submitter) typeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/types", s.handleListTypes)
	mux.HandleFunc("GET /v1/types/{name}", s.handleGetType)
	mux.HandleFunc("PUT /v1/types/{name}", s.handleUpdateType)
}

func (s *Submitter) handleListTypes(w http.ResponseWriter, r *http.Request) {
	types, err := s.store.ListTypes(r.Context())
	if err != nil {
		s.internal(w, "list types", err)
		return
	}
	out := contracts.TaskTypeList{Types: make([]contracts.TaskType, len(types))}
	for i := range types {
		out.Types[i] = types[i].API()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Submitter) handleGetType(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	tt, err := s.store.GetType(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task type %q", name))
		return
	}
	if err != nil {
		s.internal(w, "get type", err)
		return
	}
	writeJSON(w, http.StatusOK, tt.API())
}

// handleUpdateType changes the fields the body names and keeps the others.
// The body is validated on its own before the store is touched; the backoff
// pair is checked again against the locked row inside the transaction,
// because one half of it may be the stored value.
func (s *Submitter) handleUpdateType(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req contracts.TaskTypeUpdate
	if p := decodeJSON(w, r, typeBodyLimit, &req); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	if err := req.Validate(); err != nil {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, err.Error())
		return
	}
	tt, err := s.store.UpdateType(r.Context(), name, s.actor(r.Context()), func(t *store.TaskType) error {
		return applyTypeUpdate(t, req)
	})
	var p *contracts.Problem
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task type %q: types are registered by the executors that serve them", name))
		return
	case errors.As(err, &p):
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	case err != nil:
		s.internal(w, "update type", err)
		return
	}
	s.logger.Info("task type changed", "task_type", name, "paused", tt.Paused, "concurrency", tt.Concurrency)
	writeJSON(w, http.StatusOK, tt.API())
}

// applyTypeUpdate merges a validated update into the stored type. Errors are
// *contracts.Problem so the handler can answer them as they are.
func applyTypeUpdate(t *store.TaskType, u contracts.TaskTypeUpdate) error {
	ms := func(field string, v *string, dst *int64) error {
		if v == nil {
			return nil
		}
		d, err := contracts.ParseTypeDuration(field, *v)
		if err != nil {
			return invalidArgument(err)
		}
		*dst = d.Milliseconds()
		return nil
	}
	if err := ms("timeout", u.Timeout, &t.TimeoutMs); err != nil {
		return err
	}
	if err := ms("backoff_base", u.BackoffBase, &t.BackoffBaseMs); err != nil {
		return err
	}
	if err := ms("backoff_cap", u.BackoffCap, &t.BackoffCapMs); err != nil {
		return err
	}
	base := time.Duration(t.BackoffBaseMs) * time.Millisecond
	ceiling := time.Duration(t.BackoffCapMs) * time.Millisecond
	if err := contracts.ValidateBackoff(base, ceiling); err != nil {
		// Validate has checked a pair given together, so one half is stored.
		kept := "backoff_base"
		if u.BackoffCap == nil {
			kept = "backoff_cap"
		}
		return invalidArgument(fmt.Errorf("%w; the stored %s is kept when the body does not change it", err, kept))
	}
	if u.MaxRetries != nil {
		t.MaxRetries = *u.MaxRetries
	}
	if u.Priority != nil {
		t.Priority = *u.Priority
	}
	if u.Concurrency != nil {
		t.Concurrency = *u.Concurrency
	}
	if u.FailSilently != nil {
		t.FailSilently = *u.FailSilently
	}
	if u.Paused != nil {
		t.Paused = *u.Paused
	}
	return nil
}

func invalidArgument(err error) *contracts.Problem {
	return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeInvalidArgument, Detail: err.Error()}
}
