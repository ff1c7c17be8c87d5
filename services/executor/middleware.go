package executor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// MaxPanicStack bounds the stack trace a PanicError carries, so a panic's
// error stays small enough to store as the task's last error and to log.
const MaxPanicStack = 2 << 10

// PanicError is the error Recover returns for a handler that panicked.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the panicking goroutine's stack from the panic on, cut to at
	// most MaxPanicStack bytes.
	Stack []byte
}

// Error reports the panic value followed by the stack.
func (p *PanicError) Error() string {
	return fmt.Sprintf("handler panic: %v\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value if it is an error, so errors.Is and
// errors.As see through a panic(err).
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// Recover returns middleware that turns a handler panic into a *PanicError,
// so one bad task fails (and may be retried) instead of taking the executor
// down. Put it innermost (last in Use) so the other middleware sees the
// panic as an ordinary error.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Value: v, Stack: panicStack(debug.Stack(), MaxPanicStack)}
				}
			}()
			return next.Handle(ctx, t)
		})
	}
}

// panicStack drops the frames of debug.Stack and of the recovering
// function, which are the same for every panic, keeping the goroutine header
// and the frames from panic() on; then it cuts the result to at most limit
// bytes at a line boundary.
func panicStack(stack []byte, limit int) []byte {
	header, _, _ := bytes.Cut(stack, []byte("\n"))
	if i := bytes.Index(stack, []byte("\npanic(")); i >= 0 {
		trimmed := make([]byte, 0, len(header)+len(stack)-i)
		trimmed = append(trimmed, header...)
		stack = append(trimmed, stack[i:]...)
	}
	if len(stack) <= limit {
		return stack
	}
	const marker = "\n...stack truncated"
	cut := stack[:limit-len(marker)]
	if i := bytes.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return append(cut, marker...)
}

// Logging returns middleware that logs each run: a debug line when the
// handler starts and, when it returns, an info line on success or a warn line
// with the error, each with task_id, type, attempt and duration. It never
// logs the payload, which may carry personal data or secrets.
func Logging(logger *slog.Logger) Middleware {
	if logger == nil {
		panic("executor: Logging: nil logger")
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) error {
			attrs := []slog.Attr{
				slog.Int64("task_id", t.ID),
				slog.String("type", t.Type),
				slog.Int("attempt", t.Attempt),
			}
			logger.LogAttrs(ctx, slog.LevelDebug, "task started", attrs...)
			start := time.Now()
			err := next.Handle(ctx, t)
			attrs = append(attrs, slog.Duration("duration", time.Since(start)))
			if err != nil {
				attrs = append(attrs, slog.Any("err", err), slog.Bool("permanent", IsPermanent(err)))
				logger.LogAttrs(ctx, slog.LevelWarn, "task failed", attrs...)
				return err
			}
			logger.LogAttrs(ctx, slog.LevelInfo, "task succeeded", attrs...)
			return nil
		})
	}
}

// Timing returns middleware that reports each run's task type, duration and
// error to observe, so metrics (a Prometheus histogram, say) can be wired in
// without this package depending on a metrics library. observe runs after
// the handler returns; a panic skips it unless Recover sits inside Timing.
func Timing(observe func(taskType string, d time.Duration, err error)) Middleware {
	if observe == nil {
		panic("executor: Timing: nil observe function")
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) error {
			start := time.Now()
			err := next.Handle(ctx, t)
			observe(t.Type, time.Since(start), err)
			return err
		})
	}
}
