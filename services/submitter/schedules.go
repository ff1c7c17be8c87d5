package submitter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/schedule"
	"github.com/axsched/ax/services/internal/store"
)

// scheduleBodyLimit bounds a schedule's body: a template's payload plus a
// few hundred bytes of settings.
const scheduleBodyLimit = MaxPayloadDefault + bodyOverheadBytes

// scheduleRoutes mounts the schedule API. The timers fire schedules; this
// API only writes their definitions, each validated completely first.
func (s *Submitter) scheduleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/schedules", s.handleCreateSchedule)
	mux.HandleFunc("GET /v1/schedules", s.handleListSchedules)
	mux.HandleFunc("GET /v1/schedules/{name}", s.handleGetSchedule)
	mux.HandleFunc("PUT /v1/schedules/{name}", s.handleUpdateSchedule)
	mux.HandleFunc("DELETE /v1/schedules/{name}", s.handleDeleteSchedule)
	mux.HandleFunc("POST /v1/schedules/{name}/pause", s.handlePauseSchedule(true))
	mux.HandleFunc("POST /v1/schedules/{name}/resume", s.handlePauseSchedule(false))
}

// scheduleFromRequest validates a schedule completely (name, expression,
// zone, policies and the template, exactly as a submission of its task
// would be) and returns the row to write, due at its first fire time after
// now on the scheduler clock.
func (s *Submitter) scheduleFromRequest(ctx context.Context, req *contracts.ScheduleRequest) (store.Schedule, *contracts.Problem) {
	bad := func(err error) (store.Schedule, *contracts.Problem) {
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			return store.Schedule{}, invalidArgument(fmt.Errorf("%s: %s", fe.Field, fe.Detail))
		}
		return store.Schedule{}, invalidArgument(err)
	}
	if err := contracts.ValidateScheduleName(req.Name); err != nil {
		return bad(err)
	}
	now := s.clock.Now()
	spec, err := schedule.Parse(req.Cron, req.TimeZone, now)
	if err != nil {
		return bad(err)
	}
	overlap, err := schedule.ParseOverlap(req.Overlap)
	if err != nil {
		return bad(err)
	}
	catchUp, err := schedule.ParseCatchUp(req.CatchUp)
	if err != nil {
		return bad(err)
	}
	limit, err := schedule.ValidateCatchUpLimit(req.CatchUpLimit)
	if err != nil {
		return bad(err)
	}
	submit := req.Task.SubmitRequest()
	if _, p := s.validate(ctx, &submit); p != nil {
		p.Detail = "task: " + p.Detail
		return store.Schedule{}, p
	}
	return store.Schedule{Name: req.Name, Cron: req.Cron, TimeZone: spec.Zone().String(), Template: req.Task,
		Overlap: string(overlap), CatchUp: string(catchUp), CatchUpLimit: limit, Paused: req.Paused,
		NextFireMs: spec.Next(now).UnixMilli()}, nil
}

func (s *Submitter) handleCreateSchedule(w http.ResponseWriter, r *http.Request) {
	var req contracts.ScheduleRequest
	if p := decodeJSON(w, r, scheduleBodyLimit, &req); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	sc, p := s.scheduleFromRequest(r.Context(), &req)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	created, err := s.store.CreateSchedule(r.Context(), sc)
	switch {
	case errors.Is(err, store.ErrNameTaken):
		writeProblem(w, http.StatusConflict, contracts.CodeConflict,
			fmt.Sprintf("schedule %q exists: change it with PUT /v1/schedules/%s", req.Name, req.Name))
		return
	case err != nil:
		s.internal(w, "create schedule", err)
		return
	}
	s.logger.Info("schedule created", "schedule", sc.Name, "cron", sc.Cron, "time_zone", sc.TimeZone, "actor", s.actor(r.Context()))
	writeJSON(w, http.StatusCreated, created.API())
}

func (s *Submitter) handleListSchedules(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("limit=%q: want 1..1000", v))
			return
		}
		limit = n
	}
	rows, err := s.store.ListSchedules(r.Context(), r.URL.Query().Get("after"), limit)
	if err != nil {
		s.internal(w, "list schedules", err)
		return
	}
	out := contracts.ScheduleList{Schedules: make([]contracts.Schedule, len(rows))}
	for i := range rows {
		out.Schedules[i] = rows[i].API()
	}
	if len(rows) == limit {
		out.Next = rows[len(rows)-1].Name
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Submitter) handleGetSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.store.GetSchedule(r.Context(), r.PathValue("name"))
	s.answerSchedule(w, "get schedule", r.PathValue("name"), sc, err)
}

// handleUpdateSchedule replaces a schedule's definition. Its next fire time
// is computed afresh from now, so a changed expression takes effect at its
// own next fire time; fire times already fired stay fired.
func (s *Submitter) handleUpdateSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req contracts.ScheduleRequest
	if p := decodeJSON(w, r, scheduleBodyLimit, &req); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	if req.Name != "" && req.Name != name {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("name %q in the body differs from %q in the path: a schedule cannot be renamed", req.Name, name))
		return
	}
	req.Name = name
	sc, p := s.scheduleFromRequest(r.Context(), &req)
	if p != nil {
		if _, err := s.store.GetSchedule(r.Context(), name); errors.Is(err, store.ErrNotFound) {
			p = contracts.NewProblem(http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no schedule %q", name))
		}
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	updated, err := s.store.UpdateSchedule(r.Context(), sc)
	if err == nil {
		s.logger.Info("schedule changed", "schedule", name, "cron", sc.Cron, "time_zone", sc.TimeZone, "actor", s.actor(r.Context()))
	}
	s.answerSchedule(w, "update schedule", name, updated, err)
}

func (s *Submitter) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.DeleteSchedule(r.Context(), name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no schedule %q", name))
	case err != nil:
		s.internal(w, "delete schedule", err)
	default:
		s.logger.Info("schedule deleted", "schedule", name, "actor", s.actor(r.Context()))
		w.WriteHeader(http.StatusNoContent)
	}
}

// handlePauseSchedule pauses or resumes. Resuming sets the next fire time
// to the first one after now: fire times that passed while the schedule
// was paused are not caught up.
func (s *Submitter) handlePauseSchedule(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var nextMs int64
		if !paused {
			sc, err := s.store.GetSchedule(r.Context(), name)
			if err != nil {
				s.answerSchedule(w, "resume schedule", name, nil, err)
				return
			}
			spec, err := schedule.Parse(sc.Cron, sc.TimeZone, s.clock.Now())
			if err != nil {
				s.internal(w, "resume schedule", err)
				return
			}
			nextMs = spec.Next(s.clock.Now()).UnixMilli()
		}
		sc, err := s.store.PauseSchedule(r.Context(), name, paused, nextMs)
		if err == nil {
			s.logger.Info("schedule paused or resumed", "schedule", name, "paused", paused, "actor", s.actor(r.Context()))
		}
		s.answerSchedule(w, "pause schedule", name, sc, err)
	}
}

func (s *Submitter) answerSchedule(w http.ResponseWriter, what, name string, sc *store.Schedule, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no schedule %q", name))
	case err != nil:
		s.internal(w, what, err)
	default:
		writeJSON(w, http.StatusOK, sc.API())
	}
}
