package submitter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestConcurrentSubmissionsShareTransactionsCorrectly: with Run running,
// 200 concurrent single submissions (a quarter of them racing on the same
// five biz_keys) share far fewer transactions than there are submissions,
// and each gets the answer one-by-one creation would give: a new task with
// its history row and event, or the one task of its key.
func TestConcurrentSubmissionsShareTransactionsCorrectly(t *testing.T) {
	f := newFixture(t)
	f.runCoalescing(t)
	commitsBefore := testutil.ToFloat64(metrics.SubmitCommits)

	const n = 200
	type answer struct {
		code int
		task contracts.Task
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"type":"ax.noop"}`
			if i%4 == 0 {
				body = fmt.Sprintf(`{"type":"ax.noop","biz_key":"k%d"}`, i%5)
			}
			rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(body))
			answers[i].code = rec.Code
			if err := json.Unmarshal(rec.Body.Bytes(), &answers[i].task); err != nil {
				t.Errorf("submission %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	// While one transaction commits, the submissions that arrive meanwhile
	// queue for the next; one transaction each would be n.
	commits := testutil.ToFloat64(metrics.SubmitCommits) - commitsBefore
	t.Logf("%d submissions in %.0f transactions", n, commits)
	require.Positive(t, commits)
	require.Less(t, commits, float64(n/2), "concurrent submissions must share transactions")

	byKey := map[string]string{}
	created := map[string]bool{}
	for i, a := range answers {
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, a.code, "submission %d", i)
		if i%4 != 0 {
			require.Equal(t, http.StatusCreated, a.code, "submission %d has no key", i)
			require.False(t, created[a.task.ID], "task %s answered twice", a.task.ID)
			created[a.task.ID] = true
			continue
		}
		key := a.task.BizKey
		if first, ok := byKey[key]; ok {
			require.Equal(t, first, a.task.ID, "key %s answered with two tasks", key)
		} else {
			byKey[key] = a.task.ID
		}
	}
	require.Len(t, byKey, 5)
	// MySQL holds one task, one history row and one event per answer.
	require.Equal(t, [3]int{n - n/4 + 5, n - n/4 + 5, n - n/4 + 5}, f.rowCounts(t))
}

// runCoalescing runs the submitter's Run until the test ends and waits
// until submissions share transactions.
func (f *fixture) runCoalescing(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.sub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(t, 5*time.Second, "Run coalescing", f.sub.Coalescing)
}
