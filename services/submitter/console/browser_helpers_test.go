package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds the headless browser: Debian's chromium, installed by
// `make tools`. Without it the browser tests skip, except in CI, where a
// missing browser is a failure.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: `make tools` installs it")
	}
	t.Skip("chromium is not installed: `make tools` installs it")
	return ""
}

// browser is one headless Chromium shared by a test's subtests: each
// subtest opens its own tab (so sessionStorage, where the console keeps
// the key, starts empty) and the browser starts once.
type browser struct {
	ctx  context.Context
	base string // http://127.0.0.1:PORT
	dir  string // where screenshots go
}

func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1280, 860),
		// Root (as in CI) cannot use Chromium's sandbox.
		chromedp.NoSandbox,
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first run starts the browser, which lives as long as ctx: no
	// timeout here.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return &browser{ctx: ctx, base: base, dir: screenshotDir(t)}
}

// screenshotDir is bin/console under the repository (build output, not
// checked in); docs/console holds the copies the docs show.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../bin/console")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// tab opens a fresh tab for one subtest, closed when it ends.
func (b *browser) tab(t *testing.T) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	require.NoError(t, chromedp.Do(ctx), "open a tab")
	p := &page{t: t, ctx: ctx, b: b, base: b.base}
	require.NoError(t, chromedp.Listen(ctx, p.watch))
	t.Cleanup(func() {
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Empty(t, p.faults, "the page threw or broke its Content-Security-Policy")
	})
	return p
}

// watch keeps what the page reports: a script exception or a
// Content-Security-Policy (or Trusted Types) violation fails the test;
// anything else it logs is only shown.
func (p *page) watch(ev any) {
	var fault, note string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		fault = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			fault += " " + e.ExceptionDetails.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		note = fmt.Sprintf("%s %s: %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL)
		if strings.Contains(e.Entry.Text, "Content Security Policy") || strings.Contains(e.Entry.Text, "Trusted Type") {
			fault = note
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			note = "console.error"
			for _, a := range e.Args {
				note += " " + string(a.Value) + a.Description
			}
		}
	}
	if note != "" {
		p.t.Log("browser: " + note)
	}
	if fault != "" {
		p.mu.Lock()
		p.faults = append(p.faults, fault)
		p.mu.Unlock()
	}
}

// page drives one tab; every step fails the test with what it waited for.
type page struct {
	t    *testing.T
	ctx  context.Context
	b    *browser
	base string // the server the tab talks to

	mu     sync.Mutex
	faults []string // exceptions and policy violations the page reported
}

const stepTimeout = 15 * time.Second

func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	require.NoError(p.t, chromedp.Do(ctx, actions...), what)
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](p *page, what, js string, opts ...chromedp.EvaluateOption) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// poll waits until a JavaScript expression is true.
func (p *page) poll(js string) error {
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond)))
	return err
}

// open loads a console route, e.g. "#/tasks".
func (p *page) open(route string) {
	p.t.Helper()
	p.run("open "+route, chromedp.Navigate(p.base+"/ui/"+route))
}

// go changes the route in the loaded console, as a click on a link does.
func (p *page) goTo(route string) {
	p.t.Helper()
	_, err := eval[string](p, "go to "+route, fmt.Sprintf("location.hash = %q", route))
	require.NoError(p.t, err)
}

// waitText waits until the element sel's text contains want.
func (p *page) waitText(sel, want string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.innerText.includes(%q); })()`, sel, want)
	require.NoError(p.t, p.poll(js), "waiting for %q in %s; the page shows:\n%s", want, sel, p.text("body"))
}

// waitGone waits until the element sel's text no longer contains text.
func (p *page) waitGone(sel, text string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && !e.innerText.includes(%q); })()`, sel, text)
	require.NoError(p.t, p.poll(js), "waiting for %q to leave %s; the page shows:\n%s", text, sel, p.text("body"))
}

// text is the visible text of the first element sel matches ("" if none).
func (p *page) text(sel string) string {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : ""; })()`, sel)
	s, err := eval[string](p, "read text", js)
	if err != nil {
		return "(page text unavailable: " + err.Error() + ")"
	}
	return s
}

// has reports whether an element matches sel now.
func (p *page) has(sel string) bool {
	p.t.Helper()
	ok, err := eval[bool](p, "look for "+sel, fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
	require.NoError(p.t, err)
	return ok
}

// click clicks the first element sel matches.
func (p *page) click(sel string) {
	p.t.Helper()
	p.run("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// clickText clicks the first element sel matches whose text is text.
func (p *page) clickText(sel, text string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const e = [...document.querySelectorAll(%q)].find((e) => e.innerText.trim() === %q); if (e) e.click(); return !!e; })()`, sel, text)
	require.NoError(p.t, p.poll(js), "click %s %q; the page shows:\n%s", sel, text, p.text("body"))
}

// typeInto focuses the element sel matches and types text into it, key
// by key, as SendKeys does. Not SendKeys itself: it reads the node's
// attribute list before taking the node's lock, which the race detector
// reports whenever the page changes one of that node's attributes
// meanwhile (chromedp v0.23.1, query.go).
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Focus(chromedp.CSS(sel), chromedp.NodeVisible), chromedp.KeyEvent(text))
}

// login signs in with token through the console's form.
func (p *page) login(token string) {
	p.t.Helper()
	p.run("sign in",
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.Clear(chromedp.CSS("#token")),
		typeInto("#token", token),
		chromedp.Click(chromedp.CSS("#login button[type=submit]")))
}

// storedToken is what the console keeps in sessionStorage.
func (p *page) storedToken() string {
	s, err := eval[string](p, "read sessionStorage", `sessionStorage.getItem("ax.token") || ""`)
	require.NoError(p.t, err)
	return s
}

// screenshot saves the whole page as NAME.png in the screenshot folder.
func (p *page) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(p.t, err, "screenshot "+name)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.b.dir, name+".png"), png, 0o644))
}
