// Package executor runs tasks.
//
// Intake: every task type has three lanes (high, normal, low), each a
// durable JetStream pull consumer shared by all executors of the type. A
// fetcher takes the free slots of the type's bounded pool, then as many
// tasks, each time the front of the highest lane, and claims them together
// (leases in one Redis pipeline, transfers in one transaction); a task that has waited past
// its due time by more than AgingAfter counts one lane higher per AgingAfter
// elapsed, so a flood of high-priority work delays low work but never starves
// it. The node's own lanes are pulled by long-lived pull requests (feed):
// JetStream sends the work as it is stored, and a fetcher takes it from
// memory. The shared lanes are fetched on demand; when every lane is empty
// the fetcher sleeps until a feed receives work or a core-NATS doorbell
// subscription to the shared subjects rings, so new work is seen at once
// without polling. With one fetcher (strict lane order) every lane is
// fetched on demand, lowest first, with doorbells on both.
//
// A task type with a cluster-wide concurrency limit is claimed by one
// fetcher per executor, one task at a time and only while the type's
// running set has room: until then the tasks wait in their lanes, in
// order, so the next to start is always the best waiting one (a higher
// lane's first, aging aside), and none is turned back.
//
// Claim: a task type with a cluster-wide concurrency limit first takes a
// member of the type's running set in Redis (a Lua script that also evicts
// expired members); then the lease (SET lock NX PX); then the MySQL transfer
// READY->RUNNING fenced by the dispatched attempt, which increments attempt.
// Losing the transfer means another claimant won; the message is
// acknowledged and dropped. A lease found held is judged by MySQL (contest):
// a live node's claim of the same attempt in flight sends the message back
// for a second; a lease left on a still-READY task by a dead claimant or an
// older attempt is taken over.
//
// Fused claims (Config.ClaimAfter, types without a cluster-wide limit):
// the transfer is not written before the handler starts. One plain read
// checks the same fence, the handler starts, and a handler that returns
// within the window has the claim written in its outcome's transaction; a
// longer one has it written when the window ends. The dispatch is
// acknowledged once the claim has committed or been refused (fused.go).
//
// Run: the handler runs under the task's deadline. A watchdog renews every
// held lease (and running-set member) while it still holds this attempt's
// value, refreshes the tasks' heartbeats in one statement, and cancels a
// handler whose lease was lost or whose task was cancelled. The outcome is
// recorded with a transfer fenced by the attempt, so an executor whose lease
// was taken over cannot overwrite the newer attempt; a writer records the
// outcomes that finished meanwhile in one transaction (Config.OutcomeWriters
// of them commit side by side).
//
// Shutdown (graceful scale-in): when ctx ends the node leaves the membership
// registry, so it is no longer counted live and is never taken for dead;
// intake stops, and fetched messages not yet claimed are handed back to
// JetStream at once (Nak) for another executor; running handlers get
// ShutdownTimeout to finish while the watchdog keeps their leases and
// heartbeats fresh, so the reaper leaves them alone; then the rest are
// cancelled and each task goes RUNNING -> READY through a transfer fenced by
// its attempt, at once rather than after a lease, and its lease is released.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ready"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config and TypeSpec.
const (
	LockTTLDefault         = 60 * time.Second
	RenewIntervalDefault   = 5 * time.Second
	ShutdownTimeoutDefault = 30 * time.Second
	FetchersDefault        = 4
	OutcomeWritersDefault  = 2
	// OutcomeOverflowDefault is Config.OutcomeOverflow's default: at
	// moderate load a transaction's wait gathers far fewer, so one
	// records them; a backlog gathers more.
	OutcomeOverflowDefault = 64
	ConcurrencyDefault     = 32
	TimeoutDefault         = 5 * time.Minute
	MaxRetriesDefault      = 3
	AgingAfterDefault      = 30 * time.Second
	// ClaimAfterDefault is the fused-claim window (Config.ClaimAfter): long
	// enough for handlers doing in-process work or one quick call to end
	// inside it, so their claim costs no commit of its own, and short beside
	// the 5 s a fetched dispatch may stay unacknowledged (bus.ExecAckWait)
	// and the heartbeat periods, so a run longer than it shows RUNNING a
	// tenth of a second late at most.
	ClaimAfterDefault = 100 * time.Millisecond
	// ClaimAfterMax bounds the window: its dispatch stays unacknowledged
	// until the claim commits, and one held past bus.ExecAckWait (5 s)
	// would be delivered again meanwhile.
	ClaimAfterMax = time.Second
	// AbandonGrace is how long a handler that ignores its context is waited
	// for after its deadline before its slot is reclaimed.
	AbandonGrace = time.Second
	// roomPoll and roomPollMax pace the look of a limited type's fetcher
	// at the type's running set while it is full (a slot freed on this
	// node wakes it at once; one freed elsewhere is seen by the next look).
	roomPoll    = 5 * time.Millisecond
	roomPollMax = 100 * time.Millisecond
	// limitHandBack is how long a message claimed outside the limited
	// fetcher while the type is at its limit (only while the limit is
	// being set) waits before JetStream delivers it again.
	limitHandBack = 250 * time.Millisecond
	// typeCacheTTL bounds how stale a type's settings (limit, policy) may be.
	typeCacheTTL = 2 * time.Second
)

var (
	errShutdown  = errors.New("executor shutting down")
	errLeaseLost = errors.New("lease lost")
	errTimeout   = errors.New("task deadline exceeded")
	errCancelled = errors.New("task cancelled")
	// errClaimRefused stops a handler started on a deferred claim whose
	// claim MySQL refused when its window ended: the task was cancelled,
	// re-scheduled or taken by another executor while the handler ran.
	errClaimRefused = errors.New("claim refused after the fused-claim window: the task is no longer READY at the dispatched attempt")
	// errClaimFailed stops a handler whose deferred claim could not be
	// written; the dispatch comes back to run the task again.
	errClaimFailed = errors.New("claim after the fused-claim window failed")
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
	// Fetchers is how many claim loops run per type, each claiming a batch
	// of up to the pool's free slots at once. With one fetcher tasks start
	// in strict lane order; with N, the other fetchers' batches may hold
	// lower-lane tasks while the last of a higher lane are claimed.
	Fetchers int
	// OutcomeWriters is how many transactions may record finished runs at
	// once, each carrying whatever finished while the others commit; one
	// starts beside a running one only once OutcomeOverflow outcomes wait
	// (recordOutcomes).
	OutcomeWriters int
	// OutcomeOverflow is how many finished runs must wait for a second
	// (third, ...) outcome transaction to start beside a running one
	// (0: OutcomeOverflowDefault).
	OutcomeOverflow int
	// AgingAfter is how long past its due time a task waits before it
	// counts one lane higher.
	AgingAfter time.Duration
	// ClaimAfter is the fused-claim window (0: ClaimAfterDefault; negative:
	// none, every claim is written before its handler starts). A task of a
	// type without a cluster-wide limit starts on a plain read of its row;
	// if its handler returns within the window, its READY -> RUNNING claim
	// is written in the outcome's transaction (one commit per task instead
	// of two); if not, the claim is written when the window ends and the
	// run goes on as a claimed one (see fused.go).
	ClaimAfter time.Duration
	// SendReleased sends every child an outcome releases through its
	// dispatch message. By default (false) a child whose shard this node
	// owns is taken up here without one (here.go).
	SendReleased bool
	// HeartbeatInterval is how often the node writes its membership
	// heartbeat; after three missed ones the reaper takes it for dead.
	HeartbeatInterval time.Duration
	// Addr is reported in heartbeats: where the node's /metrics is served.
	Addr string
	// VersionLabel is the version this node reports and records on the
	// tasks it claims (default: the build's Version). A type's rollout
	// sends a share of its tasks to the nodes of one label (docs/rollout.md).
	VersionLabel string
	// TypeCacheClock is the clock the cache of type settings expires by
	// (nil: the local clock); tests advance a fake one instead of waiting
	// the cache's TTL out.
	TypeCacheClock clock.Clock
	// AfterLease is a fault-injection point between a claim's leases and
	// its READY→RUNNING transfer, nil in production: `make chaos` kills an
	// executor there (AX_FAULT_KILL_AFTER_LEASE) to prove a claimant dead
	// in that window holds no task.
	AfterLease func(ctx context.Context, taskIDs []int64) error
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
	if c.OutcomeWriters <= 0 {
		c.OutcomeWriters = OutcomeWritersDefault
	}
	if c.OutcomeOverflow <= 0 {
		c.OutcomeOverflow = OutcomeOverflowDefault
	}
	if c.AgingAfter <= 0 {
		c.AgingAfter = AgingAfterDefault
	}
	if c.ClaimAfter == 0 {
		c.ClaimAfter = ClaimAfterDefault
	}
	c.ClaimAfter = min(c.ClaimAfter, ClaimAfterMax)
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = membership.IntervalDefault
	}
}

// Executor is the executor service.
type Executor struct {
	cfg    Config
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	conn   *bus.Conn
	clock  clock.Clock
	logger *slog.Logger
	types  map[string]*pool
	// typeSettings caches the stored settings of the served types.
	typeSettings *store.TypeCache
	// runBase parents every handler context; it outlives the intake so
	// running tasks can finish during shutdown.
	runBase context.Context

	mu      sync.Mutex
	running map[int64]*run
	// settling holds the runs whose handlers returned and whose outcomes
	// are not recorded yet: the watchdog keeps their leases alive, and
	// nothing else.
	settling map[int64]*run
	wg       sync.WaitGroup
	// runners run the runs and their handlers.
	runners *runners
	// outcomes feeds the writers that record finished runs in batches.
	outcomes chan outcome
	// direct, when set, dispatches what the outcomes release (DispatchWith).
	direct *dispatch.Queue
	// here holds the intakes the writers put released children in
	// (here.go).
	here hereRuns
	// ready opens once every type's consumers are declared and pulled.
	ready *ready.Gate
	// afterLease (Config.AfterLease, or set by tests) runs between a
	// claim's leases and its transfer: a fault injected there is a
	// claimant killed in between.
	afterLease func(ctx context.Context, taskIDs []int64) error
	// dropHere, set only by tests, drops the released children the
	// executor would take up itself for which it says so, as if the
	// process died between the commit and taking them up.
	dropHere func([]dispatch.Task) bool
	// beforeRead, set only by tests, is told the tasks each fused claim's
	// plain read reads.
	beforeRead func(ids []int64)
	// beforeRecord, set only by tests, runs before each outcome
	// transaction: a writer held up there is MySQL slow to answer.
	beforeRecord func()
}

type pool struct {
	spec  TypeSpec
	slots chan struct{}
	// room is signalled when a run of this type frees its member of the
	// type's cluster-wide running set, so the fetcher waiting for room
	// claims the next task at once.
	room chan struct{}
	// recording bounds the runs of this type whose handlers returned and
	// whose outcomes wait for the outcome writer (recordingFactor slots
	// each): past it a returned run keeps its slot until one is recorded,
	// so intake slows to the pace MySQL records at instead of piling
	// finished runs up in memory. Only claims written before the handler
	// (claim-first) used to hold intake to that pace.
	recording chan struct{}
}

// recordingFactor is how many outcomes per slot may wait for the writer:
// enough for the writer's next transaction to carry a large batch.
const recordingFactor = 4

// New builds an executor serving types.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, conn *bus.Conn, clk clock.Clock, logger *slog.Logger, types []TypeSpec) (*Executor, error) {
	cfg.defaults()
	if cfg.Node == "" {
		return nil, errors.New("executor: node name is required")
	}
	if clk == nil {
		clk = clock.System{}
	}
	e := &Executor{cfg: cfg, store: st, rdb: rdb, keys: k, conn: conn, clock: clk, afterLease: cfg.AfterLease,
		logger: logger.With("service", "executor", "node", cfg.Node),
		types:  map[string]*pool{}, running: map[int64]*run{}, settling: map[int64]*run{}, runners: newRunners(runnerIdle),
		typeSettings: store.NewTypeCache(st, typeCacheTTL, cfg.TypeCacheClock), ready: ready.New(1)}
	for _, ts := range types {
		if err := contracts.ValidateTypeName(ts.Name); err != nil {
			return nil, err
		}
		if ts.Handler == nil {
			return nil, fmt.Errorf("executor: type %s has no handler", ts.Name)
		}
		if _, dup := e.types[ts.Name]; dup {
			return nil, fmt.Errorf("executor: type %s declared twice", ts.Name)
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
		e.types[ts.Name] = &pool{spec: ts, slots: make(chan struct{}, ts.Concurrency), room: make(chan struct{}, 1),
			recording: make(chan struct{}, recordingFactor*ts.Concurrency)}
		metrics.InitType(ts.Name)
	}
	if len(e.types) == 0 {
		return nil, errors.New("executor: serves no task types")
	}
	// Once holds a connection of its own pool while a side effect runs,
	// at most one per running handler.
	slots := 0
	for _, p := range e.types {
		slots += cap(p.slots)
	}
	st.SizeOncePool(slots)
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

// Run registers the served types, consumes their lanes and runs tasks until
// ctx ends, then shuts down gracefully.
func (e *Executor) Run(ctx context.Context) error {
	if err := e.Register(ctx); err != nil {
		return err
	}
	defer e.runners.stop()
	runBase, cancelRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRuns(errShutdown)
	e.runBase = runBase
	e.outcomes = make(chan outcome, maxOutcomeBatch)
	var writers sync.WaitGroup
	writers.Go(func() { e.recordOutcomes(e.outcomes) })
	var sends sync.WaitGroup
	if e.direct != nil {
		sends.Go(e.direct.Run)
	}
	// Runs end before the writers: drain waits for every one of them; the
	// writers' last releases are sent before Run returns.
	defer func() {
		close(e.outcomes)
		writers.Wait()
		if e.direct != nil {
			e.direct.Close()
			sends.Wait()
		}
	}()

	unsubscribe, err := e.watchCancellations()
	if err != nil {
		return err
	}
	defer unsubscribe()
	hbDone := make(chan struct{})
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	go func() { defer close(hbDone); e.watchdog(hbCtx) }()

	beatDone := make(chan struct{})
	beatCtx, stopBeat := context.WithCancel(ctx)
	firstBeat := make(chan struct{})
	go func() { defer close(beatDone); e.beat(beatCtx, firstBeat) }()
	defer func() { stopBeat(); <-beatDone }()
	<-firstBeat
	if e.direct != nil {
		// The node is in the registry now: the tasks its outcomes release
		// are taken up here (and a submitter sharing this dispatch rule
		// sends its own to it) from the first, not once the router's next
		// refresh has found it.
		if err := e.direct.Refresh(ctx); err != nil && ctx.Err() == nil {
			e.logger.Warn("read executor membership", "err", err)
		}
	}

	intakeCtx, stopIntake := context.WithCancel(ctx)
	defer stopIntake()
	var intakes []*intake
	intake, ictx := errgroup.WithContext(intakeCtx)

	for _, p := range e.types {
		in, err := e.newIntake(ictx, p)
		if err != nil {
			// Types already taking work stop and finish like on shutdown.
			stopIntake()
			intake.Go(func() error { return err })
			break
		}
		for i := range e.cfg.Fetchers {
			intake.Go(func() error { return in.fetchLoop(ictx, i) })
		}
		intake.Go(func() error { return in.tend(ictx) })
		intake.Go(func() error { return in.watchQueue(ictx) })
		defer in.close()
		intakes = append(intakes, in)
	}
	if intakeCtx.Err() == nil {
		e.openHere(intakes)
		e.ready.Done()
	}
	err = intake.Wait() // returns once intake has stopped
	e.closeHere()
	e.handBack(intakes)
	e.drain(cancelRuns)
	stopHB()
	<-hbDone
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	return err
}

// Ready is closed once the executor pulls the lanes of every type it serves.
func (e *Executor) Ready() <-chan struct{} { return e.ready.Ready() }

// drain waits for running handlers up to ShutdownTimeout, then cancels them;
// each cancelled task is handed back to READY by its own fenced transfer.
func (e *Executor) drain(cancelRuns context.CancelCauseFunc) {
	start := time.Now()
	e.logger.Info("intake stopped; draining running tasks", "running", e.runningCount(), "timeout", e.cfg.ShutdownTimeout)
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		e.logger.Info("drained: every running task finished", "took", time.Since(start).Round(time.Millisecond))
		return
	case <-time.After(e.cfg.ShutdownTimeout):
		e.logger.Warn("shutdown timeout: cancelling running tasks and handing them back", "running", e.runningCount())
	}
	cancelRuns(errShutdown)
	<-done
	e.logger.Info("drained", "took", time.Since(start).Round(time.Millisecond))
}

func (e *Executor) runningCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running)
}

// settings returns the type's stored settings, at most typeCacheTTL old,
// so limits and policies set through the API take effect without a
// restart. When the type cannot be read, the declared defaults apply.
func (e *Executor) settings(ctx context.Context, p *pool) *store.TaskType {
	t, err := e.typeSettings.Get(ctx, p.spec.Name)
	if err != nil {
		return &store.TaskType{Name: p.spec.Name, TimeoutMs: p.spec.Timeout.Milliseconds(), MaxRetries: p.spec.MaxRetries}
	}
	return t
}
