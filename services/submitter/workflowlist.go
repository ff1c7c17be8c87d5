package submitter

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// workflowListParams are the query parameters GET /v1/workflows knows; any
// other is refused, so a misspelt filter is an error rather than a list of
// everything.
var workflowListParams = []string{"status", "name", "biz_key", "created_after", "created_before", "limit", "cursor"}

// handleListWorkflows serves GET /v1/workflows (see store.ListWorkflows for
// the index each filter reads).
func (s *Submitter) handleListWorkflows(w http.ResponseWriter, r *http.Request) {
	p, prob := parseListWorkflows(r.URL.Query())
	if prob != nil {
		writeProblem(w, prob.Status, prob.Code, prob.Detail)
		return
	}
	rows, err := s.store.ListWorkflows(r.Context(), p)
	if err != nil {
		s.internal(w, "list workflows", err)
		return
	}
	out := contracts.WorkflowList{Workflows: make([]contracts.WorkflowListItem, len(rows))}
	for i := range rows {
		out.Workflows[i] = rows[i].API()
	}
	if len(rows) == p.Limit {
		out.NextCursor = encodeWorkflowCursor(rows[len(rows)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
}

func parseListWorkflows(q url.Values) (store.ListWorkflowsParams, *contracts.Problem) {
	bad := func(format string, args ...any) (store.ListWorkflowsParams, *contracts.Problem) {
		return store.ListWorkflowsParams{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	for k := range q {
		if !slices.Contains(workflowListParams, k) {
			return bad("unknown query parameter %q: want %s", k, strings.Join(workflowListParams, ", "))
		}
	}
	var p store.ListWorkflowsParams
	if v := q.Get("status"); v != "" {
		if !contracts.WorkflowStatus(v).Valid() {
			return bad("status=%q: want one of %s", v, joinWorkflowStatuses())
		}
		p.Filter.Status = contracts.WorkflowStatus(v)
	}
	if v := q.Get("name"); v != "" {
		if len(v) > maxStepKeyLen {
			return bad("name is %d bytes: want at most %d", len(v), maxStepKeyLen)
		}
		p.Filter.Name = v
	}
	var prob *contracts.Problem
	if p.Filter.BizKey, prob = parseBizKey(q); prob != nil {
		return store.ListWorkflowsParams{}, prob
	}
	if p.Filter.MinID, p.Filter.MaxID, _, prob = parseCreatedIDs(q, "workflow"); prob != nil {
		return store.ListWorkflowsParams{}, prob
	}
	if p.Limit, prob = parseListLimit(q); prob != nil {
		return store.ListWorkflowsParams{}, prob
	}
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeWorkflowCursor(v)
		if !ok {
			return bad("cursor=%q is not a cursor of a workflow list", v)
		}
		p.AfterID = id
	}
	return p, nil
}

// workflowCursorPrefix tells a workflow list's cursor from a task list's,
// so that one is not taken for the other.
const workflowCursorPrefix = "workflow."

// encodeWorkflowCursor makes the opaque next_cursor of a workflow list:
// the last workflow's ID (the list is by ID whatever its filters).
func encodeWorkflowCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(workflowCursorPrefix + strconv.FormatInt(id, 10)))
}

func decodeWorkflowCursor(v string) (int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(raw), workflowCursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return id, true
}

func joinWorkflowStatuses() string {
	names := make([]string, len(contracts.WorkflowStatuses))
	for i, st := range contracts.WorkflowStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
