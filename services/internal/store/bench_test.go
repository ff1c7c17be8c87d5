package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

var benchID atomic.Int64

func benchTask(typ string) store.NewTask {
	return store.NewTask{ID: benchID.Add(1) + 1<<40, Type: typ, Priority: contracts.PriorityNormal,
		Payload: []byte(`{"n":1}`), Status: contracts.StatusReady, NextRunTimeMs: time.Now().UnixMilli(),
		MaxRetries: 3, TimeoutMs: 60000, Reason: "bench"}
}

// BenchmarkCreateTask: one task per transaction (task + history row),
// in parallel as the submitter does under load.
func BenchmarkCreateTask(b *testing.B) {
	st, _ := testenv.Store(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := st.CreateTask(context.Background(), benchTask("bench")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreateTasksBatch: 1,000 tasks per transaction; reports tasks/s.
func BenchmarkCreateTasksBatch(b *testing.B) {
	st, _ := testenv.Store(b)
	b.ReportAllocs()
	start := time.Now()
	for range b.N {
		batch := make([]store.NewTask, 1000)
		for i := range batch {
			batch[i] = benchTask("bench")
		}
		if _, err := st.CreateTasks(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkTransferClaimAndFinish: the executor's two transfers of a task
// (READY->RUNNING, RUNNING->SUCCESS), in parallel.
func BenchmarkTransferClaimAndFinish(b *testing.B) {
	st, _ := testenv.Store(b)
	ids := make(chan int64, b.N)
	for range b.N {
		nt := benchTask("bench")
		if _, _, err := st.CreateTask(context.Background(), nt); err != nil {
			b.Fatal(err)
		}
		ids <- nt.ID
	}
	close(ids)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := <-ids
			zero, one := 0, 1
			ctx := context.Background()
			if _, err := st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
				Attempt: &zero, Claim: true, Executor: "bench", Reason: "claim"}); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusSuccess,
				Attempt: &one, Reason: "done"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTransferBatch: the executor's hot path in batches of 100 — 100
// claims in one transaction, then their 100 outcomes in another; reports
// tasks/s (each task: two transfers, two history rows, two events).
func BenchmarkTransferBatch(b *testing.B) {
	st, batches := benchBatches(b, 100)
	start := time.Now()
	for _, ids := range batches {
		claims := make([][]store.TransferParams, len(ids))
		finishes := make([][]store.TransferParams, len(ids))
		for j, id := range ids {
			claims[j] = []store.TransferParams{benchClaim(id)}
			finishes[j] = []store.TransferParams{benchFinish(id)}
		}
		benchTransfer(b, st, claims)
		benchTransfer(b, st, finishes)
	}
	b.ReportMetric(float64(b.N*100)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkTransferBatchFused: the executor's hot path with fused claims,
// in batches of 100 — one plain read of the rows (RunRows), then each
// task's claim and outcome as one chain, all in one transaction; reports
// tasks/s (the same two transfers, history rows and events per task as
// BenchmarkTransferBatch).
func BenchmarkTransferBatchFused(b *testing.B) {
	benchFused(b, func(_ int, id int64) []store.TransferParams { return []store.TransferParams{benchFinish(id)} })
}

// BenchmarkTransferBatchFusedRetry: BenchmarkTransferBatchFused for runs
// that fail and retry, as a failing dependency makes them: each task's
// claim, failure and retry as one chain, each retry due at its own time
// (the backoff's jitter), in batches of 100; reports tasks/s (four history
// rows and events per task).
func BenchmarkTransferBatchFusedRetry(b *testing.B) {
	one, msg := 1, "downstream refused"
	benchFused(b, func(n int, id int64) []store.TransferParams {
		due := time.Now().Add(time.Second).UnixMilli() + int64(n)
		return []store.TransferParams{
			{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one, LastError: &msg, Reason: "failed"},
			{TaskID: id, From: contracts.StatusFailed, To: contracts.StatusRetrying, Attempt: &one,
				IncrementRetry: true, ClearExecutor: true, NextRunTimeMs: &due, Reason: "retry 1 of 3"}}
	})
}

// benchFused writes b.N batches of 100 fused runs: one plain read of the
// rows (RunRows), then each task's claim followed by outcome(n, id) (n
// counts the tasks) as one chain, all in one transaction.
func benchFused(b *testing.B, outcome func(n int, id int64) []store.TransferParams) {
	st, batches := benchBatches(b, 100)
	start := time.Now()
	n := 0
	for _, ids := range batches {
		rows, err := st.RunRows(context.Background(), ids)
		if err != nil || len(rows) != len(ids) {
			b.Fatal(len(rows), err)
		}
		chains := make([][]store.TransferParams, len(ids))
		for j, id := range ids {
			claim := benchClaim(id)
			claim.SkipRun = true
			chains[j] = append([]store.TransferParams{claim}, outcome(n, id)...)
			n++
		}
		benchTransfer(b, st, chains)
	}
	b.ReportMetric(float64(b.N*100)/time.Since(start).Seconds(), "tasks/s")
}

// benchBatches creates b.N batches of size READY tasks and starts the
// timer.
func benchBatches(b *testing.B, size int) (*store.Store, [][]int64) {
	st, _ := testenv.Store(b)
	batches := make([][]int64, b.N)
	for i := range batches {
		nts := make([]store.NewTask, size)
		for j := range nts {
			nts[j] = benchTask("bench")
			batches[i] = append(batches[i], nts[j].ID)
		}
		if _, err := st.CreateTasks(context.Background(), nts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	return st, batches
}

func benchClaim(id int64) store.TransferParams {
	zero := 0
	return store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
		Attempt: &zero, Claim: true, Executor: "bench", Reason: "claim"}
}

func benchFinish(id int64) store.TransferParams {
	one := 1
	return store.TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusSuccess,
		Attempt: &one, Reason: "done"}
}

// benchTransfer commits chains in one transaction; every chain must win.
func benchTransfer(b *testing.B, st *store.Store, chains [][]store.TransferParams) {
	out, err := st.TransferBatch(context.Background(), chains)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range out {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// BenchmarkRelayHistory: one relay pass over 1,000 freshly written history
// rows (read, events encoded; the cursor stays in memory), with a publish that
// only counts; reports events/s. The rows are written outside the timer.
func BenchmarkRelayHistory(b *testing.B) {
	st, _ := testenv.Store(b)
	ctx := context.Background()
	gaps := store.NewHistoryGaps(0, 0)
	cursor, err := st.RelayCursor(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var relayed int
	var spent time.Duration
	for range b.N {
		batch := make([]store.NewTask, 1000)
		for i := range batch {
			batch[i] = benchTask("bench")
		}
		if _, err := st.CreateTasks(ctx, batch); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := st.RelayHistory(ctx, cursor, 1000, gaps, func(_ context.Context, rows []store.OutboxRow) error {
			relayed += len(rows)
			return nil
		})
		spent += time.Since(start)
		cursor = res.Next
		if err != nil || res.Relayed != 1000 {
			b.Fatalf("relayed %d of 1000: %v", res.Relayed, err)
		}
	}
	b.ReportMetric(float64(relayed)/spent.Seconds(), "events/s")
}

// BenchmarkChainOutcomes: BenchmarkTransferBatchFused for the two steps of
// two-step workflows (a step, then one depending on it), in batches of
// 100 workflows: the first steps' fused claims and successes in one
// transaction, which releases the second steps, then theirs in another,
// which ends the workflows; reports tasks/s (both steps counted), to set
// against BenchmarkTransferBatchFused's: what the outcome writer spends on
// a workflow's task against a single task's.
func BenchmarkChainOutcomes(b *testing.B) {
	st, _ := testenv.Store(b)
	ctx := context.Background()
	// steps[i] holds batch i's first steps, then its second steps.
	steps := make([][2][]int64, b.N)
	for i := range steps {
		nws := make([]store.NewWorkflow, 100)
		for j := range nws {
			first, second := benchTask("bench"), benchTask("bench")
			second.Status = contracts.StatusSuspend
			first.DAG, second.DAG = true, true
			second.Parents = []store.Dependency{{ParentID: first.ID, When: contracts.WhenSuccess}}
			nws[j] = store.NewWorkflow{ID: benchID.Add(1) + 1<<40, Name: "bench",
				Steps: []store.NewWorkflowStep{{Key: "a", Task: first}, {Key: "b", Task: second}}}
			steps[i][0] = append(steps[i][0], first.ID)
			steps[i][1] = append(steps[i][1], second.ID)
		}
		if _, err := st.CreateWorkflows(ctx, nws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, batch := range steps {
		if rows, err := st.RunRows(ctx, batch[0]); err != nil || len(rows) != len(batch[0]) {
			b.Fatal(len(rows), err)
		}
		for k, ids := range batch {
			chains := make([][]store.TransferParams, len(ids))
			for j, id := range ids {
				claim := benchClaim(id)
				claim.SkipRun = true
				chains[j] = []store.TransferParams{claim, benchFinish(id)}
			}
			out, released, err := st.TransferBatchDispatching(ctx, chains)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range out {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			if k == 0 && len(released) != len(ids) {
				b.Fatalf("released %d of %d second steps", len(released), len(ids))
			}
		}
	}
	b.ReportMetric(float64(b.N*200)/time.Since(start).Seconds(), "tasks/s")
}
