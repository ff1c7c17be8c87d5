package testenv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// endedID numbers the tasks EndedTask creates, apart from other helpers'.
var endedID atomic.Int64

func init() { endedID.Store(9_000_000) }

// EndedTask creates a task (through CreateTask, so with its first history
// row), then sets it to status with its end (updated_at) and due time age
// ago, files a dead letter when asked, and returns its ID. Retention tests
// use it for tasks that finished long ago, and for work in progress that
// looks as old.
func EndedTask(t testing.TB, st *store.Store, status contracts.Status, age time.Duration, deadLetter bool) int64 {
	t.Helper()
	ctx := context.Background()
	id := endedID.Add(1)
	_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: time.Now().UnixMilli(), MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
	if err != nil {
		t.Fatalf("create task %d: %v", id, err)
	}
	_, err = st.DB().ExecContext(ctx, `UPDATE tasks SET status = ?, attempt = 1, updated_at = NOW(3) - INTERVAL ? MICROSECOND,
		next_run_time = ? WHERE id = ?`, string(status), age.Microseconds(), time.Now().Add(-age-time.Second).UnixMilli(), id)
	if err != nil {
		t.Fatalf("age task %d: %v", id, err)
	}
	if deadLetter {
		_, err = st.DB().ExecContext(ctx, `INSERT INTO dead_letters (task_id, task_type, status, attempt, retry_count, last_error)
			VALUES (?, 'ax.noop', ?, 1, 3, 'boom')`, id, string(status))
		if err != nil {
			t.Fatalf("dead letter of task %d: %v", id, err)
		}
	}
	return id
}

// HistoryPublished moves the history relay's cursor past every history
// row, as a relay that kept up would have.
func HistoryPublished(t testing.TB, st *store.Store) {
	t.Helper()
	_, err := st.DB().Exec(`UPDATE event_relay SET last_id = (SELECT COALESCE(MAX(id), 0) FROM task_history) WHERE name = 'task_history'`)
	if err != nil {
		t.Fatalf("move the relay cursor: %v", err)
	}
}
