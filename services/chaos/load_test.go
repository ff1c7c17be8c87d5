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
}

// load submits a steady mix for d: mostly tasks due now, some delayed by up
// to five seconds, some failing their first attempt, a few running for
// longer than a lease renewal period. Only answered submissions count: a submission that timed out
// may or may not exist, and nobody was told it does.
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
		req, w := mixed(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			task, err := api.Submit(sctx, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			tasks = append(tasks, acked{id: task.ID, due: task.NextRunTime, w: w})
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
