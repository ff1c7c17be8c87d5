package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Child-process limits.
const (
	// readyTimeout bounds a child's start-up (migrations, streams, /readyz).
	readyTimeout = 60 * time.Second
	// stopTimeout is how long a child may take to exit after SIGTERM before
	// it is killed. ax drains in-flight work first; after a workload none
	// is left, so this is generous.
	stopTimeout = 60 * time.Second
)

// child is a process the harness started and must stop.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // exit status, set before done closes
}

// startChild runs bin with args, its output in a log file under dir. The
// child gets its own process group (a Ctrl-C in the terminal reaches the
// harness only, which then stops children in order) and, on Linux, SIGKILL
// when the harness dies, so an interrupted run never leaves orphans.
func startChild(name, dir, bin string, args ...string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = childEnv()
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// childEnv is the harness's environment without AX_* variables, so a
// child runs with the documented defaults plus the flags the harness
// passes, whatever the shell exported.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has ended, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits for a clean exit, killing the child after
// stopTimeout. It is safe to call on an exited child. The error says how
// the child ended when that was not a clean exit.
func (c *child) stop() error {
	if done, _ := c.exited(); !done {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed\n%s", c.name, stopTimeout, c.tail())
	}
	if c.err != nil {
		return fmt.Errorf("%s exited: %w\n%s", c.name, c.err, c.tail())
	}
	return nil
}

// tail returns the end of the child's log, to explain a failure.
func (c *child) tail() string {
	data, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	const keep = 3000
	if len(data) > keep {
		data = data[len(data)-keep:]
	}
	return "---- " + c.name + " log (tail) ----\n" + strings.TrimRight(string(data), "\n")
}

// waitReady polls http://addr/readyz until it answers 200, failing early if
// the child exits.
func (c *child) waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		if done, err := c.exited(); done {
			return fmt.Errorf("%s exited during start-up: %v\n%s", c.name, err, c.tail())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready on %s within %s\n%s", c.name, addr, readyTimeout, c.tail())
			}
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
