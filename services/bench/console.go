package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
)

// consoleLoads is how many times each console page is loaded.
const consoleLoads = 20

// consolePage is one page of the web console and the API calls it makes
// when it loads (submitter/console/assets/js/pages), all at once as its
// Promise.all does.
type consolePage struct {
	name  string
	calls []string
	// then are the calls the page makes once the first ones answered (a
	// workflow's lineage needs its first step's task, from the workflow).
	then []string
}

// consolePages are the pages timed; taskID names the task page's task,
// workflowID the workflow page's workflow and stepID its first step's task.
func consolePages(taskID, workflowID, stepID string) []consolePage {
	return []consolePage{
		{"overview", []string{"/v1/stats", "/v1/deadletters?limit=10", "/v1/types", "/v1/nodes"}, nil},
		{"tasks", []string{"/v1/tasks?limit=50", "/v1/types"}, nil},
		{"task", []string{"/v1/tasks/" + taskID, "/v1/tasks/" + taskID + "/history", "/v1/deadletters?task_id=" + taskID}, nil},
		{"workflows", []string{"/v1/workflows?limit=50"}, nil},
		{"workflow", []string{"/v1/workflows/" + workflowID}, []string{"/v1/tasks/" + stepID + "/lineage"}},
		{"types", []string{"/v1/types", "/v1/stats"}, nil},
		{"deadletters", []string{"/v1/deadletters?limit=50"}, nil},
	}
}

// consoleLinks finds what a browser fetches next: the src and href of the
// HTML, the imports of a module.
var consoleLinks = regexp.MustCompile(`(?:src|href)="([^"#:]+)"|from '([^']+)'`)

// timeConsole loads each console page consoleLoads times as a browser
// with an empty cache does, and reports the load time of each as
// console_<page>_ms (p50, p99) and its first, cold load: the HTML, then
// the stylesheet and the module graph wave by wave (every file of a wave
// at once), then /v1/whoami (the login check), then the page's own API
// calls at once. What it leaves out is the browser's own work: parsing and
// rendering the answers, a few milliseconds for pages of 50 rows.
func (r *run) timeConsole(ctx context.Context) ([]Metric, error) {
	base := r.target.api
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	hc := &http.Client{Timeout: time.Minute}
	get := func(ctx context.Context, p string) ([]byte, error) { return consoleGet(ctx, hc, base, p) }
	// The seeded tasks have no history; the task page shows one that
	// does, due in an hour so that it stays as it is.
	task, err := r.api.Submit(ctx, contracts.SubmitRequest{Type: TypeBench, Delay: "1h"})
	if err != nil {
		return nil, fmt.Errorf("a task for the console's task page: %w", err)
	}
	// Likewise the seeded workflows have no steps; the workflow page shows
	// one of two steps, due in an hour.
	wf, err := r.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "bench.console", Steps: []contracts.WorkflowStep{
		{Key: "a", StepTask: contracts.StepTask{Type: TypeBench, Delay: "1h"}},
		{Key: "b", StepTask: contracts.StepTask{Type: TypeBench}, DependsOn: []string{"a"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("a workflow for the console's workflow page: %w", err)
	}
	var out []Metric
	for _, p := range consolePages(task.ID, wf.ID, wf.Steps[0].TaskID) {
		samples := make([]float64, 0, consoleLoads)
		for range consoleLoads {
			t0 := time.Now()
			if err := loadConsolePage(ctx, get, p); err != nil {
				return out, fmt.Errorf("console page %s: %w", p.name, err)
			}
			samples = append(samples, ms(time.Since(t0).Nanoseconds()))
		}
		out = append(out, Metric{Name: "console_" + p.name + "_cold_ms", Value: samples[0]})
		out = append(out, latencyMetrics("console_"+p.name, samples, 50, 99)...)
	}
	return out, nil
}

// loadConsolePage fetches what loading page p fetches, in the browser's
// order.
func loadConsolePage(ctx context.Context, get func(context.Context, string) ([]byte, error), p consolePage) error {
	const index = "/ui/"
	html, err := get(ctx, index)
	if err != nil {
		return err
	}
	seen := map[string]bool{index: true}
	wave := consoleRefs(index, html, seen)
	for len(wave) > 0 {
		bodies := make([][]byte, len(wave))
		g, gctx := errgroup.WithContext(ctx)
		for i, f := range wave {
			g.Go(func() (err error) { bodies[i], err = get(gctx, f); return err })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		var next []string
		for i, f := range wave {
			if strings.HasSuffix(f, ".js") {
				next = append(next, consoleRefs(f, bodies[i], seen)...)
			}
		}
		wave = next
	}
	if _, err := get(ctx, "/v1/whoami"); err != nil {
		return err
	}
	for _, calls := range [][]string{p.calls, p.then} {
		g, gctx := errgroup.WithContext(ctx)
		for _, c := range calls {
			g.Go(func() error { _, err := get(gctx, c); return err })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// consoleRefs are the files body (served at from) links to that were not
// fetched yet, as paths from the root.
func consoleRefs(from string, body []byte, seen map[string]bool) []string {
	dir := from
	if !strings.HasSuffix(dir, "/") {
		dir = path.Dir(dir) + "/"
	}
	var out []string
	for _, m := range consoleLinks.FindAllSubmatch(body, -1) {
		ref := string(m[1]) + string(m[2])
		p := path.Clean(dir + ref)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// consoleGet GETs base+p and reads the whole answer, which must be 200.
func consoleGet(ctx context.Context, hc *http.Client, base, p string) ([]byte, error) {
	u, err := url.JoinPath(base, "/")
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u, "/")+p, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", p, resp.Status)
	}
	return body, err
}
