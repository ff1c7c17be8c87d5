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

// listRow is what the model of the table keeps of a seeded task.
type listRow struct {
	id, due     int64
	typ, node   string
	status      contracts.Status
	bizKey      *string
	createdTime time.Time
}

// seedList writes n tasks straight into the table, spread over types,
// states, executors and an hour of creation times, and returns the model.
func seedList(t *testing.T, st *store.Store, n int) []listRow {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"list.a", "list.b", "list.c"}
	states := []contracts.Status{contracts.StatusReady, contracts.StatusRunning, contracts.StatusSuccess, contracts.StatusFailed}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rows := make([]listRow, n)
	var values []string
	var args []any
	for i := range rows {
		created := base.Add(time.Duration(rng.IntN(3600_000)) * time.Millisecond)
		r := listRow{
			id: idgen.FirstAt(created) + int64(i), typ: types[rng.IntN(len(types))],
			status: states[rng.IntN(len(states))], createdTime: created,
			// Due at creation or up to a minute later; some share a due time.
			due: created.UnixMilli() + int64(rng.IntN(3))*30_000,
		}
		if r.status == contracts.StatusRunning || r.status == contracts.StatusSuccess {
			r.node = fmt.Sprintf("n%d", rng.IntN(2))
		}
		if i%5 == 0 {
			k := fmt.Sprintf("order-%d", i)
			r.bizKey = &k
		}
		rows[i] = r
		values = append(values, "(?, ?, 1, ?, ?, ?, 3, 1000, ?)")
		var node any
		if r.node != "" {
			node = r.node
		}
		var key any
		if r.bizKey != nil {
			key = []byte(*r.bizKey)
		}
		args = append(args, r.id, r.typ, key, string(r.status), r.due, node)
	}
	for chunk := range slices.Chunk(values, 500) {
		_, err := st.DB().Exec(`INSERT INTO tasks (id, task_type, priority, biz_key, status, next_run_time, max_retry_count, timeout_ms, executor_addr)
			VALUES `+strings.Join(chunk, ", "), args[:len(chunk)*6]...)
		require.NoError(t, err)
		args = args[len(chunk)*6:]
	}
	return rows
}

// listCase is one filter combination, with the model's answer.
type listCase struct {
	name   string
	filter store.TaskFilter
	match  func(listRow) bool
}

func listCases(rows []listRow) []listCase {
	key := *rows[10].bizKey
	after := time.Date(2026, 3, 1, 12, 20, 0, 0, time.UTC)
	before := time.Date(2026, 3, 1, 12, 40, 0, 0, time.UTC)
	minID, maxID := idgen.FirstAt(after), idgen.FirstAt(before)
	inRange := func(r listRow) bool { return r.id >= minID && r.id < maxID }
	dueFrom := after.Add(-time.Minute).UnixMilli()
	return []listCase{
		{"none", store.TaskFilter{}, func(listRow) bool { return true }},
		{"created", store.TaskFilter{MinID: minID, MaxID: maxID}, inRange},
		{"type", store.TaskFilter{Type: "list.b"}, func(r listRow) bool { return r.typ == "list.b" }},
		{"type created", store.TaskFilter{Type: "list.b", MinID: minID, MaxID: maxID},
			func(r listRow) bool { return r.typ == "list.b" && inRange(r) }},
		{"status", store.TaskFilter{Status: contracts.StatusSuccess}, func(r listRow) bool { return r.status == contracts.StatusSuccess }},
		{"status created", store.TaskFilter{Status: contracts.StatusReady, MinID: minID, MaxID: maxID, DueFrom: dueFrom},
			func(r listRow) bool { return r.status == contracts.StatusReady && inRange(r) }},
		{"status created_after", store.TaskFilter{Status: contracts.StatusSuccess, MinID: minID, DueFrom: dueFrom},
			func(r listRow) bool { return r.status == contracts.StatusSuccess && r.id >= minID }},
		{"status type created", store.TaskFilter{Status: contracts.StatusFailed, Type: "list.a", MinID: minID, MaxID: maxID},
			func(r listRow) bool { return r.status == contracts.StatusFailed && r.typ == "list.a" && inRange(r) }},
		{"status type", store.TaskFilter{Status: contracts.StatusFailed, Type: "list.c"},
			func(r listRow) bool { return r.status == contracts.StatusFailed && r.typ == "list.c" }},
		{"status node", store.TaskFilter{Status: contracts.StatusRunning, Node: "n1"},
			func(r listRow) bool { return r.status == contracts.StatusRunning && r.node == "n1" }},
		{"status type node created", store.TaskFilter{Status: contracts.StatusSuccess, Type: "list.a", Node: "n0", MinID: minID, DueFrom: dueFrom},
			func(r listRow) bool {
				return r.status == contracts.StatusSuccess && r.typ == "list.a" && r.node == "n0" && r.id >= minID
			}},
		{"type biz_key", store.TaskFilter{Type: rows[10].typ, BizKey: &key},
			func(r listRow) bool { return r.typ == rows[10].typ && r.bizKey != nil && *r.bizKey == key }},
		{"type biz_key status", store.TaskFilter{Type: rows[10].typ, BizKey: &key, Status: rows[10].status},
			func(r listRow) bool { return r.id == rows[10].id }},
	}
}

// TestListTasksPagesMatchTheModel pages through every filter combination
// seven tasks at a time and compares the whole walk with the model: no
// task missed or repeated, the order the filter promises.
func TestListTasksPagesMatchTheModel(t *testing.T) {
	st, _ := testenv.Store(t)
	rows := seedList(t, st, 1500)
	for _, tc := range listCases(rows) {
		t.Run(tc.name, func(t *testing.T) {
			var want []int64
			model := slices.Clone(rows)
			slices.SortFunc(model, func(a, b listRow) int {
				if tc.filter.Order() == store.OrderByDue {
					if c := cmp.Compare(b.due, a.due); c != 0 {
						return c
					}
				}
				return cmp.Compare(b.id, a.id)
			})
			for _, r := range model {
				if tc.match(r) {
					want = append(want, r.id)
				}
			}
			require.NotEmpty(t, want, "the seed has no task for this case")
			var got []int64
			p := store.ListTasksParams{Filter: tc.filter, Limit: 7}
			for range len(rows) {
				page, err := st.ListTasks(context.Background(), p)
				require.NoError(t, err)
				for _, task := range page {
					require.Nil(t, task.Payload, "lists leave payloads out")
					got = append(got, task.ID)
				}
				if len(page) < p.Limit {
					break
				}
				last := page[len(page)-1]
				p.After = &store.ListCursor{NextRunTimeMs: last.NextRunTimeMs, ID: last.ID}
			}
			require.Equal(t, want, got)
		})
	}
}

// TestListTasksReadsIndexes runs EXPLAIN for every filter combination and
// fails on a plan that reads the whole table or sorts what it read: each
// list must be one index range in the order it returns.
func TestListTasksReadsIndexes(t *testing.T) {
	st, _ := testenv.Store(t)
	rows := seedList(t, st, 1500)
	for _, tc := range listCases(rows) {
		t.Run(tc.name, func(t *testing.T) {
			for _, after := range []*store.ListCursor{nil, {NextRunTimeMs: rows[0].due, ID: rows[0].id}} {
				plan, err := st.ExplainListTasks(context.Background(), store.ListTasksParams{Filter: tc.filter, Limit: 100, After: after})
				require.NoError(t, err)
				require.Len(t, plan, 1)
				t.Logf("cursor=%v: type=%s key=%s rows=%s extra=%s", after != nil, plan[0]["type"], plan[0]["key"], plan[0]["rows"], plan[0]["Extra"])
				require.NotEqual(t, "ALL", plan[0]["type"], "full table scan: %v", plan[0])
				require.NotEmpty(t, plan[0]["key"], "no index used: %v", plan[0])
				require.NotContains(t, plan[0]["Extra"], "filesort", "the index does not give the order: %v", plan[0])
			}
		})
	}
}

// seedScheduleFires writes schedules "list.sched" (a fire for every third
// seeded task, some passed over without a task) and "list.other", and
// returns list.sched's task IDs latest fire first.
func seedScheduleFires(t *testing.T, st *store.Store, rows []listRow) []int64 {
	t.Helper()
	for i, name := range []string{"list.sched", "list.other"} {
		_, err := st.DB().Exec(`INSERT INTO schedules (id, name, cron_expr, time_zone, template, overlap, catch_up, catch_up_limit, next_fire_time)
			VALUES (?, ?, '* * * * * *', 'UTC', '{}', 'allow', 'skip', 1, 0)`, 900+i, name)
		require.NoError(t, err)
	}
	var want []int64
	base := int64(1_770_000_000_000)
	for i, r := range rows {
		sched, fire := 900+i%3, base+int64(i)*1000
		var task any = r.id
		if i%30 == 0 {
			task = nil // passed over by the overlap policy
		}
		if sched == 900 && task != nil {
			want = append(want, r.id)
		}
		if sched > 901 {
			continue
		}
		_, err := st.DB().Exec(`INSERT INTO schedule_fires (schedule_id, fire_time, schedule_name, task_id, fired_at) VALUES (?, ?, 'x', ?, ?)`,
			sched, fire, task, fire)
		require.NoError(t, err)
	}
	slices.Reverse(want)
	return want
}

// TestListScheduleTasks pages through a schedule's tasks five at a time:
// latest fire time first, each once, none of another schedule's, and an
// unknown schedule lists nothing. EXPLAIN shows every table read by key.
func TestListScheduleTasks(t *testing.T) {
	st, _ := testenv.Store(t)
	rows := seedList(t, st, 300)
	want := seedScheduleFires(t, st, rows)
	ctx := context.Background()
	var got []int64
	p := store.ScheduleTasksParams{Schedule: "list.sched", Limit: 5}
	for range len(rows) {
		page, err := st.ListScheduleTasks(ctx, p)
		require.NoError(t, err)
		for i, task := range page {
			require.Nil(t, task.Payload, "lists leave payloads out")
			if i > 0 {
				require.Less(t, task.FireTimeMs, page[i-1].FireTimeMs)
			}
			got = append(got, task.ID)
		}
		if len(page) < p.Limit {
			break
		}
		p.BeforeFireMs = page[len(page)-1].FireTimeMs
	}
	require.Equal(t, want, got)

	none, err := st.ListScheduleTasks(ctx, store.ScheduleTasksParams{Schedule: "list.nope", Limit: 5})
	require.NoError(t, err)
	require.Empty(t, none)

	for _, before := range []int64{0, 1_770_000_100_000} {
		plan, err := st.ExplainScheduleTasks(ctx, store.ScheduleTasksParams{Schedule: "list.sched", Limit: 100, BeforeFireMs: before})
		require.NoError(t, err)
		require.Len(t, plan, 3)
		for _, row := range plan {
			t.Logf("cursor=%v: table=%s type=%s key=%s rows=%s extra=%s", before != 0, row["table"], row["type"], row["key"], row["rows"], row["Extra"])
			require.NotEqual(t, "ALL", row["type"], "full table scan: %v", row)
			require.NotEmpty(t, row["key"], "no index used: %v", row)
			require.NotContains(t, row["Extra"], "filesort", "the index does not give the order: %v", row)
			require.NotContains(t, row["Extra"], "temporary", "the join sorts what it read: %v", row)
		}
	}
}
