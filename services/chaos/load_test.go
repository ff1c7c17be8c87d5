package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

// call is one handler call the receiver saw.
type call struct {
	attempt int
	start   time.Time
	ok      bool
	// end is when a successful call answered (zero until then, and for
	// a failing or cut-off call): a workflow's second step may start only
	// after it.
	end time.Time
}

// work is the payload of a chaos task: how long the handler takes and how
// many first attempts fail.
type work struct {
	Ms   int `json:"ms"`
	Fail int `json:"fail"`
}

// receiver is the webhook endpoint the executors call: it records every
// call before doing anything else, so a call an executor made just before
// it died is on the record too.
type receiver struct {
	url   string
	srv   *http.Server
	mu    sync.Mutex
	calls map[string][]call
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{url: "http://" + l.Addr().String() + "/run", calls: map[string][]call{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	var body struct {
		ID      string          `json:"id"`
		Attempt int             `json:"attempt"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var p work
	_ = json.Unmarshal(body.Payload, &p)
	ok := body.Attempt > p.Fail
	r.mu.Lock()
	i := len(r.calls[body.ID])
	r.calls[body.ID] = append(r.calls[body.ID], call{attempt: body.Attempt, start: start, ok: ok})
	r.mu.Unlock()
	select {
	case <-time.After(time.Duration(p.Ms) * time.Millisecond):
	case <-req.Context().Done():
		return
	}
	if !ok {
		http.Error(w, "planned failure", http.StatusInternalServerError)
		return
	}
	// Before the answer: nothing that follows this call's success can
	// start before it is on the record.
	r.mu.Lock()
	r.calls[body.ID][i].end = time.Now()
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) snapshot() map[string][]call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]call, len(r.calls))
	for id, cs := range r.calls {
		out[id] = append([]call(nil), cs...)
	}
	return out
}

// acked is a task the submitter acknowledged.
type acked struct {
	id  string
	due time.Time
	w   work
	// after is the step this one depends on (the second step of a
	// workflow): it is due when that step's successful call answered,
	// which the checker reads from the calls (check).
	after string
}

// workflowEvery makes every workflowEvery-th submission a workflow of two
// steps, the second depending on the first: the release of a child by its
// parent's outcome transaction, and the recovery of one whose release or
// dispatch a fault cut short, meet every fault too.
const workflowEvery = 5

// load submits a steady mix for d: mostly tasks due now, some delayed by up
// to five seconds, some failing their first attempt, a few running for
// longer than a lease renewal period, and one submission in workflowEvery
// a two-step workflow of such tasks. Only answered submissions count: a
// submission that timed out may or may not exist, and nobody was told it
// does.
func load(ctx context.Context, api *client.Client, d time.Duration, rate int) (tasks []acked, refused int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return tasks, refused
		case <-end:
			wg.Wait()
			return tasks, refused
		case <-tick.C:
		}
		submit := func(sctx context.Context) ([]acked, error) {
			req, w := mixed(i)
			task, err := api.Submit(sctx, req)
			if err != nil {
				return nil, err
			}
			return []acked{{id: task.ID, due: task.NextRunTime, w: w}}, nil
		}
		if i%workflowEvery == workflowEvery-1 {
			submit = func(sctx context.Context) ([]acked, error) { return submitWorkflow(sctx, api, i) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got, err := submit(sctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			tasks = append(tasks, got...)
		}()
	}
}

func mixed(i int) (contracts.SubmitRequest, work) {
	w := work{Ms: 20 + rand.IntN(200)}
	req := contracts.SubmitRequest{Type: taskType, BizKey: "chaos-" + strconv.Itoa(i)}
	switch n := rand.IntN(100); {
	case n < 25:
		req.Delay = fmt.Sprintf("%dms", 500+rand.IntN(4500))
	case n < 35:
		w.Fail = 1
	case n < 38:
		// Longer than a lease renewal period (5 s): a fault that touches
		// leases meets these while they run.
		w.Ms = 6000 + rand.IntN(4000)
	}
	req.Payload, _ = json.Marshal(w)
	return req, w
}

// submitWorkflow creates a workflow of two mixed steps, b depending on a,
// and returns both as acknowledged.
func submitWorkflow(ctx context.Context, api *client.Client, i int) ([]acked, error) {
	ra, wa := mixed(i)
	rb, wb := mixed(i)
	// b is due when a succeeds; a delay of its own would only add to that.
	rb.Delay = ""
	step := func(r contracts.SubmitRequest) contracts.StepTask {
		return contracts.StepTask{Type: r.Type, Payload: r.Payload, Delay: r.Delay}
	}
	wf, err := api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "chaos", BizKey: "chaos-wf-" + strconv.Itoa(i),
		Steps: []contracts.WorkflowStep{{Key: "a", StepTask: step(ra)}, {Key: "b", StepTask: step(rb), DependsOn: []string{"a"}}}})
	if err != nil {
		return nil, err
	}
	if len(wf.Steps) != 2 {
		return nil, fmt.Errorf("workflow %s answered %d steps", wf.ID, len(wf.Steps))
	}
	// The answer has no due times: the checker reads a's from its
	// creation's history row (check).
	return []acked{{id: wf.Steps[0].TaskID, w: wa}, {id: wf.Steps[1].TaskID, w: wb, after: wf.Steps[0].TaskID}}, nil
}
