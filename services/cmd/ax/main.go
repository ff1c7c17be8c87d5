// Command ax runs the ax task scheduler: all five services in one process
// (`ax up`), any one of them (`ax timer`, ...), schema migrations (`ax
// migrate`) and the task CLI (`ax task ...`). main reads configuration once
// (flags, with AX_* environment variables as their defaults) and wires; it
// does nothing else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ax:", err)
		os.Exit(1)
	}
}
