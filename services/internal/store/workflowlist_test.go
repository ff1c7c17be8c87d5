package store_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// workflowRow is what the model of the table keeps of a seeded workflow.
type workflowRow struct {
	id      int64
	name    string
	bizKey  *string
	status  contracts.WorkflowStatus
	created time.Time
}

// seedWorkflows writes n workflows straight into the table, spread over
// names, states and creation times, a fifth with a business key (one key
// shared by two names).
func seedWorkflows(t *testing.T, st *store.Store, n int) []workflowRow {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"order", "refund", "signup"}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rows := make([]workflowRow, n)
	var values []string
	var args []any
	for i := range rows {
		created := base.Add(time.Duration(rng.IntN(3600_000)) * time.Millisecond)
		r := workflowRow{id: idgen.FirstAt(created) + int64(i), name: names[rng.IntN(len(names))],
			status: contracts.WorkflowStatuses[rng.IntN(len(contracts.WorkflowStatuses))], created: created}
		if i%5 == 0 {
			k := fmt.Sprintf("key-%d", i/10) // i and i+5 share a key: two rows of it, their names may differ
			if i%10 == 5 && r.name == rows[i-5].name {
				k = fmt.Sprintf("key-%d-b", i) // the unique key (name, biz_key) holds
			}
			r.bizKey = &k
		}
		rows[i] = r
		var key any
		if r.bizKey != nil {
			key = []byte(*r.bizKey)
		}
		values = append(values, "(?, ?, ?, ?, 'seeded', 0, ?, ?)")
		args = append(args, r.id, r.name, key, string(r.status), created, created)
	}
	for chunk := range slices.Chunk(values, 500) {
		k := len(chunk) * 6
		_, err := st.DB().Exec(`INSERT INTO workflows (id, name, biz_key, status, reason, open_steps, created_at, updated_at) VALUES `+
			strings.Join(chunk, ", "), args[:k]...)
		require.NoError(t, err)
		args = args[k:]
	}
	_, err := st.DB().Exec(`ANALYZE TABLE workflows`)
	require.NoError(t, err)
	return rows
}

type workflowListCase struct {
	name   string
	filter store.WorkflowFilter
}

func workflowListCases(rows []workflowRow) []workflowListCase {
	key := *rows[0].bizKey
	mid := rows[len(rows)/2].created
	from, to := idgen.FirstAt(mid.Add(-10*time.Minute)), idgen.FirstAt(mid.Add(10*time.Minute))
	return []workflowListCase{
		{"none", store.WorkflowFilter{}},
		{"status", store.WorkflowFilter{Status: contracts.WorkflowFailed}},
		{"name", store.WorkflowFilter{Name: "refund"}},
		{"status and name", store.WorkflowFilter{Status: contracts.WorkflowSucceeded, Name: "order"}},
		{"biz_key", store.WorkflowFilter{BizKey: &key}},
		{"biz_key and name", store.WorkflowFilter{BizKey: &key, Name: rows[0].name}},
		{"created window", store.WorkflowFilter{MinID: from, MaxID: to}},
		{"status and created window", store.WorkflowFilter{Status: contracts.WorkflowRunning, MinID: from}},
	}
}

// matches is the model's answer: does row r pass filter f.
func (r workflowRow) matches(f store.WorkflowFilter) bool {
	switch {
	case f.Status != "" && r.status != f.Status,
		f.Name != "" && r.name != f.Name,
		f.BizKey != nil && (r.bizKey == nil || *r.bizKey != *f.BizKey),
		f.MinID > 0 && r.id < f.MinID,
		f.MaxID > 0 && r.id >= f.MaxID:
		return false
	}
	return true
}

// TestListWorkflowsPages pages through every filter seven at a time and
// compares with the model: newest first, each matching workflow once, no
// other.
func TestListWorkflowsPages(t *testing.T) {
	st, _ := testenv.Store(t)
	rows := seedWorkflows(t, st, 400)
	for _, tc := range workflowListCases(rows) {
		t.Run(tc.name, func(t *testing.T) {
			var want []int64
			for _, r := range rows {
				if r.matches(tc.filter) {
					want = append(want, r.id)
				}
			}
			slices.SortFunc(want, func(a, b int64) int { return cmp.Compare(b, a) })
			require.NotEmpty(t, want, "the seed gives every filter something to find")
			var got []int64
			p := store.ListWorkflowsParams{Filter: tc.filter, Limit: 7}
			for range len(rows) {
				page, err := st.ListWorkflows(context.Background(), p)
				require.NoError(t, err)
				for _, w := range page {
					got = append(got, w.ID)
					require.Equal(t, "seeded", w.Reason)
				}
				if len(page) < p.Limit {
					break
				}
				p.AfterID = page[len(page)-1].ID
			}
			require.Equal(t, want, got)
		})
	}
}

// TestListWorkflowsReadsIndexes checks with EXPLAIN that every filter, on
// its first page and a later one, reads an index range in its order: never
// the whole table, never a sort.
func TestListWorkflowsReadsIndexes(t *testing.T) {
	st, _ := testenv.Store(t)
	rows := seedWorkflows(t, st, 1500)
	for _, tc := range workflowListCases(rows) {
		t.Run(tc.name, func(t *testing.T) {
			// A later page starts past the newest match, so the range it
			// reads still holds matches (and the plan is not an empty one).
			var newest int64
			for _, r := range rows {
				if r.matches(tc.filter) && r.id > newest {
					newest = r.id
				}
			}
			for _, after := range []int64{0, newest} {
				if after != 0 && tc.filter.BizKey != nil && tc.filter.Name != "" {
					continue // the unique key's one row: there is no later page
				}
				plan, err := st.ExplainListWorkflows(context.Background(), store.ListWorkflowsParams{Filter: tc.filter, Limit: 100, AfterID: after})
				require.NoError(t, err)
				require.Len(t, plan, 1)
				t.Logf("after=%v: type=%s key=%s rows=%s extra=%s", after != 0, plan[0]["type"], plan[0]["key"], plan[0]["rows"], plan[0]["Extra"])
				require.NotEqual(t, "ALL", plan[0]["type"], "full table scan: %v", plan[0])
				require.NotEmpty(t, plan[0]["key"], "no index used: %v", plan[0])
				require.NotContains(t, plan[0]["Extra"], "filesort", "the index does not give the order: %v", plan[0])
			}
		})
	}
}
