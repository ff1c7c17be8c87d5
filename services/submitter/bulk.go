package submitter

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/store"
)

// bulkChunk is how many cancels share one transaction.
const bulkChunk = 200

// bulkTarget is what one bulk operation counts, selects and does; maxID 0
// means no bound.
type bulkTarget struct {
	// op names the operation in tokens, logs and the history.
	op    string
	count func(ctx context.Context, maxID int64) (store.MatchCount, error)
	ids   func(ctx context.Context, maxID int64, limit int) ([]int64, error)
	// apply acts on ids and says how many it did and how many had moved.
	apply func(ctx context.Context, ids []int64, actor string) (done, skipped int, err error)
}

// bulkToken is what a dry run's confirm token holds: which operation and
// filter it counted (a hash), the largest ID it counted and how many. It
// is a guard against acting on a filter nobody previewed, not a secret: a
// caller allowed to act may make one.
type bulkToken struct {
	filter string
	maxID  int64
	count  int64
}

func filterHash(op string, f contracts.BulkFilter) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{op, f.Type, f.Status, f.BizKey, f.Node, f.CreatedAfter, f.CreatedBefore}, "\x00")))
	return hex.EncodeToString(sum[:8])
}

func (t bulkToken) encode() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s.%d.%d", t.filter, t.maxID, t.count))
}

func decodeBulkToken(v string) (bulkToken, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return bulkToken{}, false
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 {
		return bulkToken{}, false
	}
	maxID, err1 := strconv.ParseInt(parts[1], 10, 64)
	count, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || maxID < 0 || count < 0 {
		return bulkToken{}, false
	}
	return bulkToken{filter: parts[0], maxID: maxID, count: count}, true
}

// decodeBulk reads a bulk request body and checks its shape.
func decodeBulk(w http.ResponseWriter, r *http.Request) (contracts.BulkRequest, *contracts.Problem) {
	var req contracts.BulkRequest
	if p := decodeJSON(w, r, 16<<10, &req); p != nil {
		return req, p
	}
	bad := func(detail string) *contracts.Problem {
		return contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, detail)
	}
	switch {
	case req.DryRun == (req.Confirm != ""):
		return req, bad("give either dry_run: true, to count what the filter matches, or confirm with the token that dry run returned")
	case len(req.Note) > maxActorNote:
		return req, bad(fmt.Sprintf("note is longer than %d bytes", maxActorNote))
	}
	return req, nil
}

// runBulk does a dry run or a confirmed call of t.
func (s *Submitter) runBulk(w http.ResponseWriter, r *http.Request, req contracts.BulkRequest, t bulkTarget) {
	ctx := r.Context()
	hash := filterHash(t.op, req.Filter)
	var tok bulkToken
	if !req.DryRun {
		var ok bool
		if tok, ok = decodeBulkToken(req.Confirm); !ok || tok.filter != hash {
			writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
				"confirm is not the token of a dry run of this operation with this filter: dry-run the filter first")
			return
		}
	}
	c, err := t.count(ctx, tok.maxID)
	if err != nil {
		s.internal(w, t.op+" in bulk", err)
		return
	}
	switch {
	case c.Count > contracts.BulkCountMax:
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("more than %d match: narrow the filter (created_after, created_before, type)", contracts.BulkCountMax))
		return
	case req.DryRun:
		writeJSON(w, http.StatusOK, contracts.BulkResult{DryRun: true, Matched: c.Count,
			Confirm: bulkToken{filter: hash, maxID: c.MaxID, count: c.Count}.encode(), Remaining: c.Count})
		return
	case c.Count > tok.count:
		writeProblem(w, http.StatusConflict, contracts.CodeConflict,
			fmt.Sprintf("%d match now, %d did at the dry run: dry-run again and check the count", c.Count, tok.count))
		return
	}
	out := contracts.BulkResult{Matched: c.Count}
	if c.Count > 0 {
		ids, err := t.ids(ctx, tok.maxID, contracts.BulkLimit)
		if err != nil {
			s.internal(w, t.op+" in bulk", err)
			return
		}
		actor := auth.WithNote(s.actor(ctx), req.Note)
		if out.Done, out.Skipped, err = t.apply(ctx, ids, actor); err != nil {
			s.internal(w, t.op+" in bulk", err)
			return
		}
		s.logger.InfoContext(ctx, "bulk "+t.op, "actor", actor, "filter", req.Filter, "matched", c.Count,
			"done", out.Done, "skipped", out.Skipped)
	}
	out.Remaining = max(c.Count-int64(out.Done+out.Skipped), 0)
	writeJSON(w, http.StatusOK, out)
}

// handleBulkCancel serves POST /v1/tasks:cancel: the filter must name one
// state that can be cancelled, so the state's index is what is read.
func (s *Submitter) handleBulkCancel(w http.ResponseWriter, r *http.Request) {
	req, p := decodeBulk(w, r)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	bf := req.Filter
	q := url.Values{}
	for k, v := range map[string]string{"type": bf.Type, "status": bf.Status, "biz_key": bf.BizKey, "node": bf.Node,
		"created_after": bf.CreatedAfter, "created_before": bf.CreatedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	f, p := parseTaskFilter(q)
	if p == nil && (f.Status == "" || !contracts.CanTransition(f.Status, contracts.StatusCancelled)) {
		p = contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("filter.status=%q: a bulk cancel needs one state that can be cancelled: READY, RUNNING, SUSPEND or RETRYING", bf.Status))
	}
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	bounded := func(maxID int64) store.TaskFilter {
		g := f
		if maxID > 0 && (g.MaxID == 0 || g.MaxID > maxID+1) {
			g.MaxID = maxID + 1
		}
		return g
	}
	s.runBulk(w, r, req, bulkTarget{
		op: "cancel",
		count: func(ctx context.Context, maxID int64) (store.MatchCount, error) {
			return s.store.CountTasks(ctx, bounded(maxID), contracts.BulkCountMax)
		},
		ids: func(ctx context.Context, maxID int64, limit int) ([]int64, error) {
			return s.store.TaskIDs(ctx, store.ListTasksParams{Filter: bounded(maxID), Limit: limit})
		},
		apply: func(ctx context.Context, ids []int64, actor string) (int, int, error) {
			return s.cancelAll(ctx, ids, f.Status, actor)
		},
	})
}

// cancelAll cancels ids, which were in state from, bulkChunk per
// transaction; a task that moved meanwhile is skipped.
func (s *Submitter) cancelAll(ctx context.Context, ids []int64, from contracts.Status, actor string) (done, skipped int, err error) {
	for chunk := range slices.Chunk(ids, bulkChunk) {
		chains := make([][]store.TransferParams, len(chunk))
		for i, id := range chunk {
			chains[i] = []store.TransferParams{{TaskID: id, From: from, To: contracts.StatusCancelled,
				Reason: "cancelled in bulk through the API", Actor: actor}}
		}
		res, err := s.store.TransferBatch(ctx, chains)
		if err != nil {
			return done, skipped, err
		}
		for _, r := range res {
			switch {
			case r.Err == nil:
				done++
			case errors.Is(r.Err, store.ErrConflict), errors.Is(r.Err, store.ErrNotFound):
				skipped++
			default:
				return done, skipped, r.Err
			}
		}
	}
	return done, skipped, nil
}

// handleBulkRetry serves POST /v1/deadletters:retry: open dead letters by
// type and filing time.
func (s *Submitter) handleBulkRetry(w http.ResponseWriter, r *http.Request) {
	req, p := decodeBulk(w, r)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	bf := req.Filter
	var f store.DeadLetterFilter
	if bf.Status != "" || bf.BizKey != "" || bf.Node != "" {
		p = contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
			"dead letters are filtered by type, created_after and created_before (when the letter was filed) only")
	}
	if p == nil && bf.Type != "" {
		if err := contracts.ValidateTypeName(bf.Type); err != nil {
			p = contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, "filter.type: "+err.Error())
		}
		f.Type = bf.Type
	}
	if p == nil {
		f.CreatedAfter, f.CreatedBefore, p = parseCreated(url.Values{"created_after": {bf.CreatedAfter}, "created_before": {bf.CreatedBefore}})
	}
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	bounded := func(maxID int64) store.DeadLetterFilter { g := f; g.MaxID = maxID; return g }
	s.runBulk(w, r, req, bulkTarget{
		op: "retry",
		count: func(ctx context.Context, maxID int64) (store.MatchCount, error) {
			return s.store.CountOpenDeadLetters(ctx, bounded(maxID), contracts.BulkCountMax)
		},
		ids: func(ctx context.Context, maxID int64, limit int) ([]int64, error) {
			return s.store.OpenDeadLetterIDs(ctx, bounded(maxID), limit)
		},
		apply: func(ctx context.Context, ids []int64, actor string) (done, skipped int, err error) {
			for _, id := range ids {
				_, err := s.store.RetryDeadLetter(ctx, id, actor, s.clock.Now().UnixMilli())
				switch {
				case err == nil:
					done++
				case errors.Is(err, store.ErrAlreadyRetried), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
					skipped++
				default:
					return done, skipped, err
				}
			}
			return done, skipped, nil
		},
	})
}

// bulkRoutes mounts the bulk operations.
func (s *Submitter) bulkRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks:cancel", s.handleBulkCancel)
	mux.HandleFunc("POST /v1/deadletters:retry", s.handleBulkRetry)
}
