package submitter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/rollout"
	"github.com/axsched/ax/services/internal/store"
)

// rolloutLogShown is how many moves GET /v1/types/{name}/rollout shows.
const rolloutLogShown = 20

func (s *Submitter) rolloutRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/types/{name}/rollout", s.handleGetRollout)
	mux.HandleFunc("PUT /v1/types/{name}/rollout", s.handleStartRollout)
	mux.HandleFunc("POST /v1/types/{name}/rollout/{action}", s.handleMoveRollout)
}

// handleStartRollout starts a rollout: validated whole before anything is
// written, refused with 409 while the type's previous one still runs.
func (s *Submitter) handleStartRollout(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req contracts.RolloutRequest
	if p := decodeJSON(w, r, typeBodyLimit, &req); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	plan, err := req.Plan()
	if err != nil {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, err.Error())
		return
	}
	ro, err := s.store.StartRollout(r.Context(), store.Rollout{
		Type: name, Version: plan.Version, Steps: plan.Steps, StepTime: plan.StepTime, Grace: plan.Grace,
		Window: plan.Window, MinSamples: plan.MinSamples, MaxP99Worse: plan.MaxP99Worse,
		MaxFailureDiff: plan.MaxFailureDiff, MaxTimeoutDiff: plan.MaxTimeoutDiff,
	}, s.actor(r.Context()))
	if !s.rolloutStored(w, name, err) {
		return
	}
	rollout.Count(ro, rollout.ActionStart, "manual")
	var warnings []string
	if w := s.unknownVersion(r, name, plan.Version); w != "" {
		warnings = append(warnings, w)
	}
	s.logger.Info("rollout started", "task_type", name, "version", plan.Version, "percent", ro.Percent, "actor", s.actor(r.Context()))
	s.writeRollout(w, r, http.StatusCreated, ro, warnings)
}

// rolloutStored answers a failed store call and reports whether it
// succeeded.
func (s *Submitter) rolloutStored(w http.ResponseWriter, name string, err error) bool {
	var p *contracts.Problem
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrRolloutActive):
		writeProblem(w, http.StatusConflict, contracts.CodeConflict, err.Error()+": roll it back or let it finish first")
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task type %q, or it has no rollout", name))
	case errors.As(err, &p):
		writeProblem(w, p.Status, p.Code, p.Detail)
	default:
		s.internal(w, "rollout", err)
	}
	return false
}

// unknownVersion warns when no registered executor of the type reports
// version: allowed (it may be about to start), but the canary's tasks
// fall back to stable after the grace until one does.
func (s *Submitter) unknownVersion(r *http.Request, name, version string) string {
	if s.nodes == nil {
		return ""
	}
	nodes, err := membership.List(r.Context(), s.nodes.rdb, s.nodes.keys.Nodes(), s.clock.Now(), membership.DeadAfter(s.nodes.heartbeat))
	if err != nil {
		return ""
	}
	for _, n := range nodes {
		if n.Version == version && slices.Contains(n.Types, name) {
			return ""
		}
	}
	return fmt.Sprintf("no executor of %s reports version %q: its share of tasks falls back to stable after the grace until one does", name, version)
}

func (s *Submitter) handleGetRollout(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ro, err := s.store.GetRollout(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		// A registered type that never had a rollout: all its tasks go to
		// whichever executors serve it.
		if _, err = s.store.GetType(r.Context(), name); err == nil {
			writeJSON(w, http.StatusOK, contracts.Rollout{Type: name, State: contracts.RolloutNone, Steps: []int{}, Log: []contracts.RolloutLog{}})
			return
		}
	}
	if !s.rolloutStored(w, name, err) {
		return
	}
	s.writeRollout(w, r, http.StatusOK, ro, nil)
}

// writeRollout answers with the rollout, both sides over its window, the
// guard's verdict and the latest moves.
func (s *Submitter) writeRollout(w http.ResponseWriter, r *http.Request, status int, ro *store.Rollout, warnings []string) {
	c, st, v, err := rollout.Measure(r.Context(), s.store, ro)
	if err != nil {
		s.internal(w, "measure rollout", err)
		return
	}
	log, err := s.store.RolloutLog(r.Context(), ro.Type, rolloutLogShown)
	if err != nil {
		s.internal(w, "rollout log", err)
		return
	}
	p99, fail, tout := ro.MaxP99Worse, ro.MaxFailureDiff, ro.MaxTimeoutDiff
	writeJSON(w, status, contracts.Rollout{
		Type: ro.Type, Version: ro.Version, State: ro.State, Percent: ro.Percent, Steps: ro.Steps,
		Step: ro.StepIndex + 1, StepTime: ro.StepTime.String(), StepStartedAt: ro.StepStartedAt, Grace: ro.Grace.String(),
		Guard: contracts.RolloutGuard{Window: ro.Window.String(), MinSamples: ro.MinSamples, MaxP99Worse: &p99,
			MaxFailureDiff: &fail, MaxTimeoutDiff: &tout},
		Canary: c, Stable: st, Verdict: v, Log: log, Warnings: warnings,
	})
}

// rolloutActions are the manual moves and the states each applies to.
var rolloutActions = map[string][]string{
	rollout.ActionPromote:  {contracts.RolloutRunning, contracts.RolloutPaused},
	rollout.ActionPause:    {contracts.RolloutRunning},
	rollout.ActionResume:   {contracts.RolloutPaused},
	rollout.ActionRollback: {contracts.RolloutRunning, contracts.RolloutPaused},
}

// handleMoveRollout is an operator's move: promote (the next step now, or
// done after the last), pause, resume or rollback; each is logged with its
// actor and optional reason.
func (s *Submitter) handleMoveRollout(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	states, ok := rolloutActions[action]
	if !ok {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound,
			fmt.Sprintf("no rollout action %q: want promote, pause, resume or rollback", action))
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		if p := decodeJSON(w, r, typeBodyLimit, &req); p != nil {
			writeProblem(w, p.Status, p.Code, p.Detail)
			return
		}
	}
	actor := s.actor(r.Context())
	ro, err := s.store.MoveRollout(r.Context(), name, 0, func(ro *store.Rollout) (store.RolloutMove, error) {
		if !slices.Contains(states, ro.State) {
			return store.RolloutMove{}, contracts.NewProblem(http.StatusConflict, contracts.CodeConflict,
				fmt.Sprintf("cannot %s a rollout that is %s", action, ro.State))
		}
		act := action
		if act == rollout.ActionPromote {
			ro.State = contracts.RolloutRunning
			if ro.StepIndex+1 < len(ro.Steps) {
				act = rollout.ActionAdvance
			}
		}
		from := ro.Percent
		rollout.Apply(ro, act, time.Now().UTC())
		reason := fmt.Sprintf("%s by %s: %d%% -> %d%%", action, actor, from, ro.Percent)
		if req.Reason != "" {
			reason += ": " + req.Reason
		}
		return store.RolloutMove{Action: act, Reason: reason, Actor: actor}, nil
	})
	if !s.rolloutStored(w, name, err) {
		return
	}
	rollout.Count(ro, action, "manual")
	s.logger.Info("rollout moved", "task_type", name, "action", action, "percent", ro.Percent, "actor", actor)
	s.writeRollout(w, r, http.StatusOK, ro, nil)
}
