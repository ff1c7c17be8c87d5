package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one OS process of a scenario that faults can kill, freeze and
// start again with the same arguments.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string
	// port, when set, is polled for a listener after each start.
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newProc(t *testing.T, dir, name, bin string, port int, args ...string) *proc {
	return &proc{name: name, bin: bin, args: args, port: port, log: filepath.Join(dir, name+".log")}
}

// start runs the process and waits until its port accepts connections.
func (p *proc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("%s log: %v", p.name, err)
	}
	fmt.Fprintf(f, "==== start %s %v\n", time.Now().Format(time.RFC3339Nano), p.args)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.env...)
	// Its own process group, so the test's own signals do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if p.port != 0 {
		waitPort(t, p.name, p.port, done)
	}
}

func waitPort(t *testing.T, name string, port int, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("%s exited while starting", name)
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: nothing listening on %d after 60s", name, port)
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		t.Fatalf("%s: not running", p.name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %s: %v", p.name, sig, err)
	}
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGCONT) // a frozen process must die too
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 30*time.Second)
}

// stop asks for a clean exit and kills after timeout.
func (p *proc) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (p *proc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
}

func (p *proc) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
