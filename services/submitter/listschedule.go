package submitter

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// scheduleListParams are the parameters GET /v1/tasks?schedule= takes: a
// schedule's tasks are read through its fires in fire-time order
// (store.ListScheduleTasks), which no other filter's index serves, so
// any other filter would mean reading the schedule's whole history.
var scheduleListParams = []string{"schedule", "limit", "cursor"}

// listScheduleTasks serves GET /v1/tasks?schedule=NAME: the tasks the
// schedule fired, latest fire time first, each with its origin. An
// unknown schedule lists no tasks, as any filter that matches none.
func (s *Submitter) listScheduleTasks(w http.ResponseWriter, r *http.Request) {
	p, prob := parseScheduleList(r.URL.Query())
	if prob != nil {
		writeProblem(w, prob.Status, prob.Code, prob.Detail)
		return
	}
	rows, err := s.store.ListScheduleTasks(r.Context(), p)
	if err != nil {
		s.internal(w, "list tasks of a schedule", err)
		return
	}
	out := contracts.TaskList{Tasks: make([]contracts.Task, len(rows))}
	for i := range rows {
		out.Tasks[i] = rows[i].API()
		out.Tasks[i].Origin = &contracts.TaskOrigin{Schedule: p.Schedule, FireTime: time.UnixMilli(rows[i].FireTimeMs).UTC()}
	}
	if len(rows) == p.Limit {
		last := rows[len(rows)-1]
		out.NextCursor = encodeCursor(store.OrderByFire, store.ListCursor{NextRunTimeMs: last.FireTimeMs, ID: last.ID})
	}
	writeJSON(w, http.StatusOK, out)
}

func parseScheduleList(q url.Values) (store.ScheduleTasksParams, *contracts.Problem) {
	bad := func(format string, args ...any) (store.ScheduleTasksParams, *contracts.Problem) {
		return store.ScheduleTasksParams{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	for k := range q {
		if !slices.Contains(scheduleListParams, k) {
			return bad("schedule combines only with limit and cursor, not %s: a schedule's tasks are read in fire-time order through its fires, which no other filter's index serves", k)
		}
	}
	p := store.ScheduleTasksParams{Schedule: q.Get("schedule")}
	if err := contracts.ValidateScheduleName(p.Schedule); err != nil {
		return bad("schedule: %v", err)
	}
	var prob *contracts.Problem
	if p.Limit, prob = parseListLimit(q); prob != nil {
		return store.ScheduleTasksParams{}, prob
	}
	if v := q.Get("cursor"); v != "" {
		c, order, ok := decodeCursor(v)
		if !ok {
			return bad("cursor=%q is not a cursor this API returned", v)
		}
		if order != store.OrderByFire {
			return bad("cursor belongs to a list with other filters: pass the same filters as the page it came from")
		}
		p.BeforeFireMs = c.NextRunTimeMs
	}
	return p, nil
}
