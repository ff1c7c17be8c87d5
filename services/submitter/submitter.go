// Package submitter is ax's front door: the HTTP JSON API that accepts
// tasks, answers for their state and history, and cancels them.
//
// A submission is validated completely before anything is written; the task
// row, its first history row and its READY event are then written in one
// transaction (store.CreateTask), so an accepted task is never lost and a
// rejected one leaves no trace. Errors are application/problem+json with a
// stable code (contracts.Code*).
package submitter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// Defaults for Config.
const (
	MaxPayloadDefault  = 64 << 10
	MaxHorizonDefault  = 365 * 24 * time.Hour
	MaxRetriesLimit    = 100
	MaxTimeoutDefault  = contracts.MaxTypeDuration
	bodyOverheadBytes  = 8 << 10
	cancelRetriesLimit = 5
)

// Config tunes the submitter.
type Config struct {
	// Node names this submitter in history rows.
	Node string
	// MaxPayload is the largest payload accepted, in bytes.
	MaxPayload int64
	// MaxHorizon is how far ahead a task may be scheduled.
	MaxHorizon time.Duration
	// StatsTTL and FinishedStatsTTL are how long GET /v1/stats serves a
	// reading of the work in progress and of the finished tasks (defaults
	// StatsTTLDefault, FinishedStatsTTLDefault).
	StatsTTL, FinishedStatsTTL time.Duration
	// TypeCacheClock is the clock the cache of type settings expires by
	// (nil: the local clock); tests advance a fake one instead of waiting
	// the cache's TTL out.
	TypeCacheClock clock.Clock
}

// Submitter serves the task API.
type Submitter struct {
	types  *store.TypeCache
	nodes  *registry
	cfg    Config
	store  *store.Store
	ids    *idgen.Generator
	clock  clock.Clock
	logger *slog.Logger

	// Single submissions and workflow creations share transactions while
	// Run runs (coalesce.go, workflowcoalesce.go).
	creates    chan *createReq
	workflows  chan *workflowReq
	stopped    chan struct{}
	coalescing atomic.Bool
	// direct, when set, dispatches what the coalesced submissions create
	// (DispatchWith).
	direct *dispatch.Queue

	statsCache statsCache
}

// New builds a submitter.
func New(cfg Config, st *store.Store, ids *idgen.Generator, clk clock.Clock, logger *slog.Logger) *Submitter {
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = MaxPayloadDefault
	}
	if cfg.MaxHorizon <= 0 {
		cfg.MaxHorizon = MaxHorizonDefault
	}
	if cfg.StatsTTL <= 0 {
		cfg.StatsTTL = StatsTTLDefault
	}
	if cfg.FinishedStatsTTL <= 0 {
		cfg.FinishedStatsTTL = FinishedStatsTTLDefault
	}
	// A changed type default reaches new submissions within a second.
	return &Submitter{types: store.NewTypeCache(st, time.Second, cfg.TypeCacheClock), cfg: cfg, store: st, ids: ids, clock: clk, logger: logger.With("service", "submitter"),
		creates: make(chan *createReq), workflows: make(chan *workflowReq), stopped: make(chan struct{})}
}

// Routes mounts the API on mux.
func (s *Submitter) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks", s.handleSubmit)
	mux.HandleFunc("GET /v1/tasks", s.handleListTasks)
	mux.HandleFunc("GET /v1/stats", s.handleStats)
	mux.HandleFunc("GET /v1/tasks/{id}", s.handleGet)
	mux.HandleFunc("GET /v1/tasks/{id}/history", s.handleHistory)
	mux.HandleFunc("POST /v1/tasks/{id}/cancel", s.handleCancel)
	s.typeRoutes(mux)
	s.rolloutRoutes(mux)
	s.batchRoutes(mux)
	s.bulkRoutes(mux)
	s.deadLetterRoutes(mux)
	s.nodeRoutes(mux)
	s.keyRoutes(mux)
	s.scheduleRoutes(mux)
	s.workflowRoutes(mux)
	s.consoleRoutes(mux)
}

// Run groups concurrent single submissions into shared transactions until
// ctx ends; the HTTP handlers mounted by Routes do the rest of the work, and
// the process's HTTP server stops after every service has returned (a late
// submission then has a transaction of its own).
func (s *Submitter) Run(ctx context.Context) error {
	s.initTypeMetrics(ctx)
	if s.direct != nil {
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			s.direct.Run()
		}()
		// Sends what the last groups queued before returning.
		defer func() { s.direct.Close(); <-sent }()
	}
	s.coalesce(ctx)
	return nil
}

// initTypeMetrics creates the per-type series of every registered type at
// zero, so a type's submission rate exists before its first submission. A
// type registered later gets its series with its first submission.
func (s *Submitter) initTypeMetrics(ctx context.Context) {
	types, err := s.store.ListTypes(ctx)
	if err != nil {
		s.logger.Warn("list task types for metrics", "err", err)
		return
	}
	for _, t := range types {
		metrics.InitType(t.Name)
	}
}

// actor is who a request's changes are recorded as: its API key via this
// submitter ("key:alice via submitter@n1"), or this submitter alone when
// auth is off.
func (s *Submitter) actor(ctx context.Context) string {
	return auth.Actor(auth.FromContext(ctx), "submitter@"+s.cfg.Node)
}

func (s *Submitter) handleSubmit(w http.ResponseWriter, r *http.Request) {
	limit := s.cfg.MaxPayload + bodyOverheadBytes
	if r.ContentLength > limit {
		writeProblem(w, http.StatusRequestEntityTooLarge, contracts.CodePayloadTooLarge,
			fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit))
		return
	}
	var req contracts.SubmitRequest
	data, p := readBody(w, r, limit)
	if p == nil {
		p = decodeSubmission(data, &req)
	}
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	nt, p := s.validate(r.Context(), &req)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	ctx, span := startSubmit(r.Context(), r.Header.Get(tracing.Header), &nt)
	var (
		task  *store.Task
		dedup bool
		err   error
	)
	if len(nt.Parents) == 0 {
		task, dedup, err = s.create(ctx, nt)
	} else {
		// Not coalesced: an unknown parent must fail this task alone.
		task, dedup, err = s.createOne(ctx, nt)
		if err == nil {
			// Parents that had ended settled it at once.
			task, err = s.store.GetTask(ctx, task.ID)
		}
	}
	endSubmit(span, task, dedup, err)
	var unknown *store.UnknownParentError
	if errors.As(err, &unknown) {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, unknown.Error())
		return
	}
	if err != nil {
		s.internal(w, "create task", err)
		return
	}
	metrics.SubmittedBy.With(metrics.SubmitKey{Type: task.Type, Deduplicated: dedup}).Inc()
	out := task.API()
	status := http.StatusCreated
	if dedup {
		out.Deduplicated = true
		status = http.StatusOK
	}
	writeJSON(w, status, out)
}

func (s *Submitter) validate(ctx context.Context, req *contracts.SubmitRequest) (store.NewTask, *contracts.Problem) {
	bad := func(code, format string, args ...any) (store.NewTask, *contracts.Problem) {
		return store.NewTask{}, &contracts.Problem{Status: http.StatusBadRequest, Code: code, Detail: fmt.Sprintf(format, args...)}
	}
	if err := contracts.ValidateTypeName(req.Type); err != nil {
		return bad(contracts.CodeInvalidArgument, "%v", err)
	}
	if int64(len(req.Payload)) > s.cfg.MaxPayload {
		return store.NewTask{}, &contracts.Problem{Status: http.StatusRequestEntityTooLarge, Code: contracts.CodePayloadTooLarge,
			Detail: fmt.Sprintf("payload of %d bytes exceeds the limit of %d bytes", len(req.Payload), s.cfg.MaxPayload)}
	}
	prio, err := contracts.ParsePriority(req.Priority)
	if err != nil {
		return bad(contracts.CodeInvalidArgument, "%v", err)
	}
	if req.Delay != "" && req.RunAt != "" {
		return bad(contracts.CodeInvalidArgument, "give either delay or run_at, not both")
	}
	now := s.clock.Now()
	due := now
	switch {
	case req.Delay != "":
		d, err := time.ParseDuration(req.Delay)
		if err != nil {
			return bad(contracts.CodeInvalidArgument, "delay %q is not a duration like \"10s\" or \"1500ms\"", req.Delay)
		}
		if d < 0 {
			return bad(contracts.CodeInvalidArgument, "delay %q is negative", req.Delay)
		}
		due = now.Add(d)
	case req.RunAt != "":
		t, err := time.Parse(time.RFC3339Nano, req.RunAt)
		if err != nil {
			return bad(contracts.CodeInvalidArgument, "run_at %q is not an RFC 3339 time like \"2026-01-02T15:04:05Z\"", req.RunAt)
		}
		due = t
		if due.Before(now) {
			due = now
		}
	}
	if due.Sub(now) > s.cfg.MaxHorizon {
		return bad(contracts.CodeInvalidArgument, "task is due %s from now, beyond the horizon of %s", due.Sub(now).Round(time.Second), s.cfg.MaxHorizon)
	}
	if len(req.BizKey) > contracts.MaxBizKeyLen {
		return bad(contracts.CodeInvalidArgument, "biz_key is %d bytes, more than %d", len(req.BizKey), contracts.MaxBizKeyLen)
	}
	if req.TraceParent != "" && !tracing.Valid(req.TraceParent) {
		return bad(contracts.CodeInvalidArgument, "traceparent %q is not a W3C trace context like \"00-<32 hex>-<16 hex>-01\"", req.TraceParent)
	}
	if req.MaxRetries != nil && (*req.MaxRetries < 0 || *req.MaxRetries > MaxRetriesLimit) {
		return bad(contracts.CodeInvalidArgument, "max_retries must be between 0 and %d, got %d", MaxRetriesLimit, *req.MaxRetries)
	}
	var timeout time.Duration
	if req.Timeout != "" {
		// Timeouts are stored in milliseconds: "999us" would be stored as 0
		// and mean "the type's default", so it is refused, not rounded.
		timeout, err = contracts.ParseTypeDuration("timeout", req.Timeout)
		if err != nil {
			return bad(contracts.CodeInvalidArgument, "%v", err)
		}
	}
	tt, err := s.types.Get(ctx, req.Type)
	if errors.Is(err, store.ErrNotFound) {
		return bad(contracts.CodeUnknownType, "task type %q is not registered: start an executor that serves it", req.Type)
	}
	if err != nil {
		return store.NewTask{}, &contracts.Problem{Status: http.StatusServiceUnavailable, Code: contracts.CodeUnavailable, Detail: "task types cannot be read now"}
	}
	nt := store.NewTask{
		Type: req.Type, Priority: prio, Payload: req.Payload, Status: contracts.StatusReady,
		NextRunTimeMs: due.UnixMilli(), MaxRetries: tt.MaxRetries, TimeoutMs: tt.TimeoutMs,
		Reason: "submitted", Actor: s.actor(ctx), TraceParent: req.TraceParent,
	}
	if nt.Priority == "" {
		nt.Priority = tt.Priority
	}
	if req.MaxRetries != nil {
		nt.MaxRetries = *req.MaxRetries
	}
	if timeout > 0 {
		nt.TimeoutMs = timeout.Milliseconds()
	}
	if req.BizKey != "" {
		k := req.BizKey
		nt.BizKey = &k
	}
	if due.After(now) {
		nt.Reason = "submitted, due " + due.UTC().Format(time.RFC3339Nano)
	} else {
		// Due at once: the relay dispatches it with its READY event.
		nt.Route = events.RouteDispatch
	}
	if p := parentsOf(req, &nt); p != nil {
		return store.NewTask{}, p
	}
	return nt, nil
}

// parentsOf reads the parents and condition of a submission into nt,
// which then waits for them in SUSPEND.
func parentsOf(req *contracts.SubmitRequest, nt *store.NewTask) *contracts.Problem {
	bad := func(format string, args ...any) *contracts.Problem {
		return contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	when, err := contracts.ParseCondition(req.When)
	switch {
	case err != nil:
		return bad("%v", err)
	case req.When != "" && len(req.Parents) == 0:
		return bad("when is set but parents is empty")
	case len(req.Parents) > contracts.MaxParents:
		return bad("parents holds %d IDs, more than %d", len(req.Parents), contracts.MaxParents)
	}
	for i, raw := range req.Parents {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return bad("parent %q is not a task ID", raw)
		}
		if slices.Contains(req.Parents[:i], raw) {
			return bad("parent %s is listed twice", raw)
		}
		nt.Parents = append(nt.Parents, store.Dependency{ParentID: id, When: when})
	}
	if len(nt.Parents) > 0 {
		nt.Status, nt.Route = contracts.StatusSuspend, events.RouteTimer
		nt.Reason = "waiting for parents " + strings.Join(req.Parents, ", ")
	}
	return nil
}

func (s *Submitter) taskID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %q: task IDs are positive integers", raw))
		return 0, false
	}
	return id, true
}

func (s *Submitter) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok || !s.mayRead(w, r, id) {
		return
	}
	task, err := s.store.GetTask(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %d", id))
		return
	}
	if err != nil {
		s.internal(w, "get task", err)
		return
	}
	out := task.API()
	if out.Origin, err = s.store.TaskOrigin(r.Context(), id); err != nil {
		s.internal(w, "get task", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Submitter) handleHistory(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok || !s.mayRead(w, r, id) {
		return
	}
	rows, err := s.store.History(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %d", id))
		return
	}
	if err != nil {
		s.internal(w, "task history", err)
		return
	}
	out := contracts.History{TaskID: strconv.FormatInt(id, 10), History: make([]contracts.HistoryEntry, len(rows))}
	for i, h := range rows {
		out.History[i] = contracts.HistoryEntry{From: h.From, To: h.To, Attempt: h.Attempt, Reason: h.Reason,
			Actor: h.Actor, EventID: h.EventID, At: h.At}
	}
	writeJSON(w, http.StatusOK, out)
}

// mayRead lets a submit key read only the tasks it created (auth.Rule's
// OwnTasks); other keys, and requests without one, pass. The creator is the
// actor of the task's creating history row, which names the key.
func (s *Submitter) mayRead(w http.ResponseWriter, r *http.Request, id int64) bool {
	k := auth.FromContext(r.Context())
	if k == nil || k.Role != auth.RoleSubmit {
		return true
	}
	creator, err := s.store.TaskCreator(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %d", id))
		return false
	case err != nil:
		s.internal(w, "load task creator", err)
		return false
	case !auth.Owns(k, creator):
		writeProblem(w, http.StatusForbidden, contracts.CodeForbidden,
			fmt.Sprintf("API key %s has role submit and may read only the tasks it submitted", k.Name))
		return false
	}
	return true
}

// handleCancel cancels one task. As for a dead letter's re-run, the key
// is the actor of record and ?actor= (who pressed the button) only a note.
func (s *Submitter) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	note := r.URL.Query().Get("actor")
	if len(note) > maxActorNote {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("actor is longer than %d bytes", maxActorNote))
		return
	}
	for range cancelRetriesLimit {
		task, err := s.store.GetTask(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %d", id))
			return
		}
		if err != nil {
			s.internal(w, "cancel task", err)
			return
		}
		if !contracts.CanTransition(task.Status, contracts.StatusCancelled) {
			writeProblem(w, http.StatusConflict, contracts.CodeIllegalTransition,
				fmt.Sprintf("task %d is %s and cannot be cancelled", id, task.Status))
			return
		}
		_, err = s.store.Transfer(r.Context(), store.TransferParams{
			TaskID: id, From: task.Status, To: contracts.StatusCancelled,
			Reason: "cancelled through the API", Actor: auth.WithNote(s.actor(r.Context()), note),
		})
		if errors.Is(err, store.ErrConflict) {
			continue // it moved meanwhile; look again
		}
		if err != nil {
			s.internal(w, "cancel task", err)
			return
		}
		task, err = s.store.GetTask(r.Context(), id)
		if err != nil {
			s.internal(w, "cancel task", err)
			return
		}
		writeJSON(w, http.StatusOK, task.API())
		return
	}
	writeProblem(w, http.StatusConflict, contracts.CodeIllegalTransition, fmt.Sprintf("task %d kept changing state; try again", id))
}

func (s *Submitter) internal(w http.ResponseWriter, what string, err error) {
	s.logger.Error(what+" failed", "err", err)
	writeProblem(w, http.StatusInternalServerError, contracts.CodeInternal, what+" failed; see the submitter's log")
}
