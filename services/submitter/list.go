package submitter

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/store"
)

// Limits of GET /v1/tasks.
const (
	listLimitDefault = 100
	listLimitMax     = 1000
	// dueMargin widens the due-time bound derived from created_after: a
	// task due at once is stamped due a few milliseconds before its ID is
	// made, and the two clocks may differ a little.
	dueMargin = time.Minute
)

// listParams are the query parameters GET /v1/tasks knows; any other is
// refused, so a misspelt filter is an error rather than a list of
// everything.
var listParams = []string{"type", "status", "biz_key", "node", "schedule", "created_after", "created_before", "limit", "cursor"}

// handleListTasks serves GET /v1/tasks (see store.ListTasks for the
// indexes each filter reads).
func (s *Submitter) handleListTasks(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("schedule") {
		s.listScheduleTasks(w, r)
		return
	}
	p, prob := parseListTasks(r.URL.Query())
	if prob != nil {
		writeProblem(w, prob.Status, prob.Code, prob.Detail)
		return
	}
	rows, err := s.store.ListTasks(r.Context(), p)
	if err != nil {
		s.internal(w, "list tasks", err)
		return
	}
	out := contracts.TaskList{Tasks: make([]contracts.Task, len(rows))}
	for i := range rows {
		out.Tasks[i] = rows[i].API()
	}
	if len(rows) == p.Limit {
		last := rows[len(rows)-1]
		out.NextCursor = encodeCursor(p.Filter.Order(), store.ListCursor{NextRunTimeMs: last.NextRunTimeMs, ID: last.ID})
	}
	writeJSON(w, http.StatusOK, out)
}

// parseTaskFilter reads the filter parameters of GET /v1/tasks (and of the
// bulk operations) from q.
func parseTaskFilter(q url.Values) (store.TaskFilter, *contracts.Problem) {
	var f store.TaskFilter
	bad := func(format string, args ...any) (store.TaskFilter, *contracts.Problem) {
		return store.TaskFilter{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	if v := q.Get("type"); v != "" {
		if err := contracts.ValidateTypeName(v); err != nil {
			return bad("type: %v", err)
		}
		f.Type = v
	}
	if v := q.Get("status"); v != "" {
		if !slices.Contains(contracts.Statuses, contracts.Status(v)) {
			return bad("status=%q: want one of %s", v, joinStatuses())
		}
		f.Status = contracts.Status(v)
	}
	if q.Has("biz_key") && f.Type == "" {
		return bad("biz_key needs type: business keys are unique per task type")
	}
	var prob *contracts.Problem
	if f.BizKey, prob = parseBizKey(q); prob != nil {
		return store.TaskFilter{}, prob
	}
	if v := q.Get("node"); v != "" {
		if f.Status == "" {
			return bad("node needs status (e.g. status=RUNNING): no index is kept by executor, so the state's index is read")
		}
		if len(v) > 255 {
			return bad("node is %d bytes: want at most 255", len(v))
		}
		f.Node = v
	}
	var after time.Time
	if f.MinID, f.MaxID, after, prob = parseCreatedIDs(q, "task"); prob != nil {
		return store.TaskFilter{}, prob
	}
	if !after.IsZero() && f.Status != "" {
		f.DueFrom = after.Add(-dueMargin).UnixMilli()
	}
	return f, nil
}

// parseBizKey reads biz_key, nil when absent: 1 to MaxBizKeyLen bytes,
// compared byte for byte.
func parseBizKey(q url.Values) (*string, *contracts.Problem) {
	if !q.Has("biz_key") {
		return nil, nil
	}
	v := q.Get("biz_key")
	if v == "" || len(v) > contracts.MaxBizKeyLen {
		return nil, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("biz_key is %d bytes: want 1 to %d", len(v), contracts.MaxBizKeyLen))
	}
	return &v, nil
}

// parseCreatedIDs reads created_after and created_before as bounds of the
// snowflake IDs, which hold the creation time: minID <= id < maxID (0:
// unbounded); after is created_after's time, zero when absent. what names
// the rows listed (task, workflow) in the error.
func parseCreatedIDs(q url.Values, what string) (minID, maxID int64, after time.Time, p *contracts.Problem) {
	after, before, p := parseCreated(q)
	if p != nil {
		return 0, 0, after, p
	}
	if !after.IsZero() {
		minID = max(idgen.FirstAt(after), 1)
	}
	if !before.IsZero() {
		if maxID = idgen.FirstAt(before); maxID == 0 {
			return 0, 0, after, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
				fmt.Sprintf("created_before=%q is before the first possible %s", q.Get("created_before"), what))
		}
	}
	return minID, maxID, after, nil
}

// parseCreated reads created_after and created_before (RFC 3339).
func parseCreated(q url.Values) (after, before time.Time, p *contracts.Problem) {
	for _, c := range []struct {
		name string
		into *time.Time
	}{{"created_after", &after}, {"created_before", &before}} {
		v := q.Get(c.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return after, before, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
				fmt.Sprintf("%s=%q is not an RFC 3339 time like \"2026-01-02T15:04:05Z\"", c.name, v))
		}
		*c.into = t
	}
	if !after.IsZero() && !before.IsZero() && !after.Before(before) {
		return after, before, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
			"created_after must be before created_before")
	}
	return after, before, nil
}

func parseListTasks(q url.Values) (store.ListTasksParams, *contracts.Problem) {
	bad := func(format string, args ...any) (store.ListTasksParams, *contracts.Problem) {
		return store.ListTasksParams{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	for k := range q {
		if !slices.Contains(listParams, k) {
			return bad("unknown query parameter %q: want %s", k, strings.Join(listParams, ", "))
		}
	}
	f, prob := parseTaskFilter(q)
	if prob != nil {
		return store.ListTasksParams{}, prob
	}
	p := store.ListTasksParams{Filter: f}
	if p.Limit, prob = parseListLimit(q); prob != nil {
		return store.ListTasksParams{}, prob
	}
	if v := q.Get("cursor"); v != "" {
		c, order, ok := decodeCursor(v)
		if !ok {
			return bad("cursor=%q is not a cursor this API returned", v)
		}
		if order != f.Order() {
			return bad("cursor belongs to a list with other filters: pass the same filters as the page it came from")
		}
		p.After = &c
	}
	return p, nil
}

// parseListLimit reads limit, listLimitDefault when absent.
func parseListLimit(q url.Values) (int, *contracts.Problem) {
	v := q.Get("limit")
	if v == "" {
		return listLimitDefault, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > listLimitMax {
		return 0, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf("limit=%q: want 1..%d", v, listLimitMax))
	}
	return n, nil
}

// encodeCursor makes the opaque next_cursor: the list's order and the last
// task's key in it (in a schedule's list, OrderByFire, the first number
// is the fire time rather than the due time). It is opaque so that its form may change; it is not
// secret (anybody may make one, and it only says where a page starts).
func encodeCursor(o store.ListOrder, c store.ListCursor) string {
	raw := fmt.Sprintf("%s.%d.%d", o, c.NextRunTimeMs, c.ID)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(v string) (store.ListCursor, store.ListOrder, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return store.ListCursor{}, "", false
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 {
		return store.ListCursor{}, "", false
	}
	o := store.ListOrder(parts[0])
	due, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if (o != store.OrderByID && o != store.OrderByDue && o != store.OrderByFire) || err1 != nil || err2 != nil || id < 1 {
		return store.ListCursor{}, "", false
	}
	return store.ListCursor{NextRunTimeMs: due, ID: id}, o, true
}

func joinStatuses() string {
	names := make([]string, len(contracts.Statuses))
	for i, st := range contracts.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
