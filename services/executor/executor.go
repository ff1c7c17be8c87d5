// Package executor runs tasks.
//
// It consumes the executor subject of every task type it serves. For each
// dispatched task it takes a slot of the type's bounded pool, claims the task
// (Redis SET lock NX PX, then the MySQL transfer READY->RUNNING fenced by the
// dispatched attempt, which increments attempt), acknowledges the message and
// runs the handler under the type's deadline. A watchdog renews every held
// lock while it still holds this attempt's value and refreshes the tasks'
// heartbeats in one statement; a lock found lost cancels its handler. The
// outcome is recorded with a transfer fenced by the attempt, so an executor
// whose lease was taken over cannot overwrite the newer attempt.
//
// Shutdown: intake stops first, running handlers get ShutdownTimeout to
// finish, then they are cancelled and their tasks returned to READY.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config and TypeSpec.
const (
	LockTTLDefault         = 60 * time.Second
	RenewIntervalDefault   = 5 * time.Second
	ShutdownTimeoutDefault = 30 * time.Second
	FetchersDefault        = 4
	ConcurrencyDefault     = 32
	TimeoutDefault         = 5 * time.Minute
	MaxRetriesDefault      = 3
	// AbandonGrace is how long a handler that ignores its context is waited
	// for after its deadline before its slot is reclaimed.
	AbandonGrace = time.Second
)

var (
	errShutdown  = errors.New("executor shutting down")
	errLeaseLost = errors.New("lease lost")
	errTimeout   = errors.New("task deadline exceeded")
)

// Config tunes an executor.
type Config struct {
	// Node identifies this executor in history rows, locks and task rows.
	Node string
	// LockTTL is the lease length; the watchdog renews it every
	// RenewInterval while the handler runs.
	LockTTL       time.Duration
	RenewInterval time.Duration
	// ShutdownTimeout bounds how long running handlers may finish on stop.
	ShutdownTimeout time.Duration
	// Fetchers is how many dispatched messages per type are claimed at once.
	Fetchers int
}

func (c *Config) defaults() {
	if c.LockTTL <= 0 {
		c.LockTTL = LockTTLDefault
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = RenewIntervalDefault
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.Fetchers <= 0 {
		c.Fetchers = FetchersDefault
	}
}

// Executor is the executor service.
type Executor struct {
	cfg    Config
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	conn   *bus.Conn
	logger *slog.Logger
	types  map[string]*pool
	// runBase parents every handler context; it outlives the intake so
	// running tasks can finish during shutdown.
	runBase context.Context

	mu      sync.Mutex
	running map[int64]*run
	wg      sync.WaitGroup
}

type pool struct {
	spec  TypeSpec
	slots chan struct{}
}

type run struct {
	task     Task
	lockKey  string
	lockVal  string
	deadline time.Duration
	cancel   context.CancelCauseFunc
	leaseOut atomic.Bool
}

// New builds an executor serving types.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, conn *bus.Conn, logger *slog.Logger, types []TypeSpec) (*Executor, error) {
	cfg.defaults()
	if cfg.Node == "" {
		return nil, errors.New("executor: node name is required")
	}
	e := &Executor{cfg: cfg, store: st, rdb: rdb, keys: k, conn: conn,
		logger: logger.With("service", "executor", "node", cfg.Node),
		types:  map[string]*pool{}, running: map[int64]*run{}}
	for _, ts := range types {
		if err := contracts.ValidateTypeName(ts.Name); err != nil {
			return nil, err
		}
		if ts.Handler == nil {
			return nil, fmt.Errorf("executor: type %s has no handler", ts.Name)
		}
		if ts.Timeout <= 0 {
			ts.Timeout = TimeoutDefault
		}
		if ts.MaxRetries <= 0 {
			ts.MaxRetries = MaxRetriesDefault
		}
		if ts.Concurrency <= 0 {
			ts.Concurrency = ConcurrencyDefault
		}
		e.types[ts.Name] = &pool{spec: ts, slots: make(chan struct{}, ts.Concurrency)}
	}
	if len(e.types) == 0 {
		return nil, errors.New("executor: serves no task types")
	}
	return e, nil
}

// Register declares the served types in MySQL (existing ones keep their
// stored configuration). Run calls it too; wiring calls it before the API
// opens so the first submission of a served type is accepted.
func (e *Executor) Register(ctx context.Context) error {
	for _, p := range e.types {
		err := e.store.RegisterType(ctx, store.TaskType{Name: p.spec.Name,
			TimeoutMs: p.spec.Timeout.Milliseconds(), MaxRetries: p.spec.MaxRetries, Priority: contracts.PriorityNormal})
		if err != nil {
			return err
		}
	}
	return nil
}

// Run registers the served types, consumes their subjects and runs tasks
// until ctx ends, then shuts down gracefully.
func (e *Executor) Run(ctx context.Context) error {
	if err := e.Register(ctx); err != nil {
		return err
	}
	router, err := bus.NewRouter(e.logger)
	if err != nil {
		return err
	}
	for name, p := range e.types {
		spec := bus.ConsumerSpec{Name: events.ExecConsumer(name), Stream: events.StreamWork,
			Subject: events.ExecSubject(name), Parallel: e.cfg.Fetchers}
		if err := bus.AddConsumer(router, e.conn.URL, spec, e.logger, e.claimer(p)); err != nil {
			return err
		}
	}
	runBase, cancelRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRuns(errShutdown)
	e.runBase = runBase
	hbDone := make(chan struct{})
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	go func() { defer close(hbDone); e.watchdog(hbCtx) }()

	err = router.Run(ctx) // returns once intake has stopped
	e.drain(cancelRuns)
	stopHB()
	<-hbDone
	return err
}

// drain waits for running handlers up to ShutdownTimeout, then cancels them.
func (e *Executor) drain(cancelRuns context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(e.cfg.ShutdownTimeout):
		e.logger.Warn("shutdown timeout: cancelling running tasks", "running", e.runningCount())
	}
	cancelRuns(errShutdown)
	<-done
}

func (e *Executor) runningCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running)
}

// claimer handles one dispatched message: take a pool slot, claim, start.
func (e *Executor) claimer(p *pool) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		var d events.TaskDispatched
		if err := events.Decode(msg.Payload, &d); err != nil {
			e.logger.Error("dropping undecodable dispatch", "err", err)
			return nil
		}
		ctx := msg.Context()
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		started := false
		defer func() {
			if !started {
				<-p.slots
			}
		}()
		r, err := e.claim(ctx, p, &d)
		if err != nil || r == nil {
			return err
		}
		started = true
		e.wg.Add(1)
		go e.execute(p, r)
		return nil
	}
}

// claim takes the lease and the RUNNING transfer; nil run means another
// claimant won and the message is done.
func (e *Executor) claim(ctx context.Context, p *pool, d *events.TaskDispatched) (*run, error) {
	next := d.Attempt + 1
	r := &run{
		task:    Task{ID: d.TaskID, Type: d.Type, Attempt: next, Payload: d.Payload},
		lockKey: e.keys.Lock(d.TaskID),
		lockVal: e.cfg.Node + ":" + strconv.Itoa(next),
	}
	ok, err := e.rdb.SetNX(ctx, r.lockKey, r.lockVal, e.cfg.LockTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("lock task %d: %w", d.TaskID, err)
	}
	if !ok {
		metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
		return nil, nil
	}
	attempt := d.Attempt
	_, err = e.store.Transfer(ctx, store.TransferParams{
		TaskID: d.TaskID, From: contracts.StatusReady, To: contracts.StatusRunning,
		Reason: "claimed by " + e.cfg.Node, Attempt: &attempt, Claim: true, Executor: e.cfg.Node,
	})
	if err != nil {
		e.releaseLock(r)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
			return nil, nil
		}
		return nil, err
	}
	timeout := time.Duration(d.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = p.spec.Timeout
	}
	r.task.Payload = d.Payload
	r.deadline = timeout
	return r, nil
}

// execute runs the handler and records its outcome.
func (e *Executor) execute(p *pool, r *run) {
	defer e.wg.Done()
	defer func() { <-p.slots }()
	ctx, cancel := context.WithCancelCause(e.runBase)
	defer cancel(nil)
	r.cancel = cancel
	e.track(r, true)
	metrics.ExecutorActive.WithLabelValues(r.task.Type).Inc()
	defer metrics.ExecutorActive.WithLabelValues(r.task.Type).Dec()

	tctx, tcancel := context.WithTimeoutCause(ctx, r.deadline, errTimeout)
	defer tcancel()
	start := time.Now()
	err := e.callHandler(tctx, p.spec.Handler, r)
	metrics.ExecutorRunSeconds.WithLabelValues(r.task.Type).Observe(time.Since(start).Seconds())
	// Stop renewing before finish releases the lock, or the watchdog would
	// take the release for a lost lease.
	e.track(r, false)
	e.finish(r, err, context.Cause(tctx))
}

// callHandler runs the handler in its own goroutine so a handler that
// ignores its context can be abandoned at the deadline: the slot is
// reclaimed, though the goroutine itself runs on until it returns (Go cannot
// kill a goroutine).
func (e *Executor) callHandler(ctx context.Context, h Handler, r *run) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("handler panic: %v\n%s", v, truncate(string(debug.Stack()), 1500))
			}
		}()
		t := r.task
		done <- h.Handle(ctx, &t)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(AbandonGrace):
		e.logger.Warn("handler ignored its context; abandoned", "task_id", r.task.ID, "type", r.task.Type)
		return fmt.Errorf("handler abandoned after ignoring its context: %w", context.Cause(ctx))
	}
}

func (e *Executor) finish(r *run, herr, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer e.releaseLock(r)
	log := e.logger.With("task_id", r.task.ID, "type", r.task.Type, "attempt", r.task.Attempt)
	if r.leaseOut.Load() {
		metrics.ExecutorRuns.WithLabelValues(r.task.Type, "lease_lost").Inc()
		log.Warn("lease lost while running; outcome not recorded", "err", herr)
		return
	}
	attempt := r.task.Attempt
	p := store.TransferParams{TaskID: r.task.ID, From: contracts.StatusRunning, Attempt: &attempt}
	outcome := ""
	switch {
	case errors.Is(cause, errShutdown):
		p.To, p.Reason, p.ClearExecutor = contracts.StatusReady, e.cfg.Node+" shut down before the task finished", true
		outcome = "returned"
	case herr == nil:
		p.To, p.Reason = contracts.StatusSuccess, "handler succeeded on "+e.cfg.Node
		outcome = "success"
	case errors.Is(cause, errTimeout):
		msg := herr.Error()
		p.To, p.Reason, p.LastError = contracts.StatusTimeout, "deadline exceeded on "+e.cfg.Node, &msg
		outcome = "timeout"
	default:
		msg := herr.Error()
		p.To, p.Reason, p.LastError = contracts.StatusFailed, "handler failed on "+e.cfg.Node+": "+msg, &msg
		outcome = "failed"
	}
	metrics.ExecutorRuns.WithLabelValues(r.task.Type, outcome).Inc()
	if _, err := e.store.Transfer(ctx, p); err != nil {
		if errors.Is(err, store.ErrConflict) {
			log.Warn("outcome rejected: attempt is no longer current", "to", p.To, "err", err)
			return
		}
		log.Error("record outcome failed; the reaper will recover the task", "to", p.To, "err", err)
	}
}

func (e *Executor) track(r *run, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if add {
		e.running[r.task.ID] = r
	} else if e.running[r.task.ID] == r {
		delete(e.running, r.task.ID)
	}
}

func (e *Executor) releaseLock(r *run) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := releaseScript.Run(ctx, e.rdb, []string{r.lockKey}, r.lockVal).Err(); err != nil {
		e.logger.Warn("release lock failed; it expires by itself", "task_id", r.task.ID, "err", err)
	}
}

// watchdog renews the leases of running tasks and refreshes their heartbeat.
func (e *Executor) watchdog(ctx context.Context) {
	t := time.NewTicker(e.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.renew(ctx)
	}
}

func (e *Executor) renew(ctx context.Context) {
	e.mu.Lock()
	runs := make([]*run, 0, len(e.running))
	for _, r := range e.running {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	pipe := e.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		cmds[i] = renewScript.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal, e.cfg.LockTTL.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		// Redis unreachable: keep running; if the lease really lapses the
		// fenced outcome write is rejected.
		e.logger.Warn("lease renewal failed", "err", err)
		return
	}
	refs := make([]store.AttemptRef, 0, len(runs))
	for i, r := range runs {
		if n, _ := cmds[i].Int(); n == 0 {
			r.leaseOut.Store(true)
			metrics.LeasesLost.Inc()
			e.logger.Warn("lease lost; cancelling handler", "task_id", r.task.ID, "attempt", r.task.Attempt)
			if r.cancel != nil {
				r.cancel(errLeaseLost)
			}
			continue
		}
		refs = append(refs, store.AttemptRef{ID: r.task.ID, Attempt: r.task.Attempt})
	}
	if err := e.store.Heartbeat(ctx, refs); err != nil {
		e.logger.Warn("heartbeat failed", "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
