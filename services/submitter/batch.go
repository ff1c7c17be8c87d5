package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// MaxBatch is the most submissions one POST /v1/tasks:batch may carry; it
// keeps one batch's transaction, and the locks it holds, short.
const MaxBatch = 1000

// batchBodyLimit bounds the body of a batch. MaxBatch full-size submissions
// (MaxBatch × (payload limit + 8 KiB), about 70 MiB by default) would let one
// request hold that much memory, so a batch gets 16 MiB in all: bulk
// producers send many small tasks, and big payloads go one per request.
const batchBodyLimit = 16 << 20

// batchAttempts bounds how often one batch is retried after a snowflake
// collision or a deadlock with a concurrent batch, each of which rolls the
// whole transaction back.
const batchAttempts = 3

// batchRoutes mounts the batch submission API.
func (s *Submitter) batchRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks:batch", s.handleBatch)
}

// batchBody is BatchRequest with the submissions left raw, so that one
// that is not acceptable (an unknown field, a field of the wrong type) is
// rejected on its own instead of failing the whole batch.
type batchBody struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// handleBatch creates many tasks in one request. Each submission is
// validated like POST /v1/tasks; an invalid one is rejected with its own
// problem while the valid ones are still created, all of them in one
// transaction. Only a fault of the request as a whole (size, JSON, count)
// or of the server answers with a problem, and then nothing is written.
func (s *Submitter) handleBatch(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > batchBodyLimit {
		writeProblem(w, http.StatusRequestEntityTooLarge, contracts.CodePayloadTooLarge,
			fmt.Sprintf("request body of %d bytes exceeds the batch limit of %d bytes", r.ContentLength, batchBodyLimit))
		return
	}
	var body batchBody
	if p := decodeJSON(w, r, batchBodyLimit, &body); p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	if len(body.Tasks) == 0 || len(body.Tasks) > MaxBatch {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("tasks holds %d submissions: send between 1 and %d", len(body.Tasks), MaxBatch))
		return
	}
	out, valid, index, p := s.validateBatch(r.Context(), body.Tasks)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	spans := startSubmits(r.Context(), r.Header.Get(tracing.Header), valid)
	created, err := s.createBatch(r.Context(), valid)
	for j, span := range spans {
		if err != nil {
			endSubmit(span, nil, false, err)
		} else {
			endSubmit(span, created[j].Task, created[j].Deduplicated, nil)
		}
	}
	if err != nil {
		s.internal(w, "create tasks", err)
		return
	}
	for j, c := range created {
		fillResult(&out, index[j], c)
	}
	writeJSON(w, http.StatusOK, out)
}

// validateBatch validates every submission, recording the rejected ones in
// the answer. valid holds the tasks to create and index[j] the position of
// valid[j] in the request. A problem that is not the submissions' fault (the
// task types cannot be read) is returned for the whole batch instead, so
// that valid tasks are not rejected for it.
func (s *Submitter) validateBatch(ctx context.Context, raws []json.RawMessage) (
	out contracts.BatchResponse, valid []store.NewTask, index []int, _ *contracts.Problem,
) {
	out.Results = make([]contracts.BatchItemResult, len(raws))
	for i, raw := range raws {
		nt, p := s.validateItem(ctx, raw)
		if p != nil && p.Status >= http.StatusInternalServerError {
			return out, nil, nil, p
		}
		out.Results[i] = contracts.BatchItemResult{Index: i}
		if p != nil {
			out.Results[i].Status, out.Results[i].Error = p.Status, contracts.NewProblem(p.Status, p.Code, p.Detail)
			out.Rejected++
			continue
		}
		valid, index = append(valid, nt), append(index, i)
	}
	return out, valid, index, nil
}

// validateItem decodes one submission of a batch as POST /v1/tasks decodes
// its body, then validates it.
func (s *Submitter) validateItem(ctx context.Context, raw json.RawMessage) (store.NewTask, *contracts.Problem) {
	var req contracts.SubmitRequest
	if p := decodeItem(raw, &req, "submission"); p != nil {
		// The batch as a whole parsed, so every item is valid JSON and
		// what remains is an unacceptable value.
		return store.NewTask{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, p.Detail)
	}
	if len(req.Parents) > 0 || req.When != "" {
		// One unknown parent would fail the batch's shared transaction.
		return store.NewTask{}, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument,
			"parents are not accepted in a batch: submit the task alone, or as a workflow step")
	}
	return s.validate(ctx, &req)
}

// createBatch creates the valid submissions with fresh snowflakes, retrying
// the whole transaction on an ID collision or a deadlock.
func (s *Submitter) createBatch(ctx context.Context, nts []store.NewTask) ([]store.BatchResult, error) {
	if len(nts) == 0 {
		return nil, nil
	}
	var err error
	for range batchAttempts {
		for i := range nts {
			nts[i].ID = s.ids.Next()
		}
		var res []store.BatchResult
		res, err = s.store.CreateTasks(ctx, nts)
		if errors.Is(err, store.ErrIDTaken) || store.IsDeadlock(err) {
			continue
		}
		return res, err
	}
	return nil, fmt.Errorf("%d attempts failed, the last with: %w", batchAttempts, err)
}

// fillResult records what became of the submission at index i. The task
// goes without its payload: a batch answer stays small whatever the
// payloads, and the producer has them anyway.
func fillResult(out *contracts.BatchResponse, i int, c store.BatchResult) {
	task := c.Task.API()
	task.Payload = nil
	res := &out.Results[i]
	res.Task = &task
	if c.Deduplicated {
		task.Deduplicated = true
		res.Status, res.Deduplicated = http.StatusOK, true
		out.Deduplicated++
	} else {
		res.Status = http.StatusCreated
		out.Created++
	}
	metrics.SubmittedBy.With(metrics.SubmitKey{Type: task.Type, Deduplicated: c.Deduplicated}).Inc()
}
