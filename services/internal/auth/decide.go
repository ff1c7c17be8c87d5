package auth

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Mode is the --auth setting.
type Mode string

// The modes. ModeAuto is the default.
const (
	// ModeAuto checks keys unless the process is bound to loopback and no
	// key exists; bound elsewhere with no key, the process refuses to start.
	ModeAuto Mode = "auto"
	// ModeOn always checks keys; bound beyond loopback it still refuses to
	// start with no key, since every request would be refused.
	ModeOn Mode = "on"
	// ModeOff never checks keys, wherever the process is bound (behind a
	// proxy that authenticates, for example), and says so loudly.
	ModeOff Mode = "off"
)

// ParseMode accepts on, off or auto; "" is auto.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeAuto:
		return ModeAuto, nil
	case ModeOn, ModeOff:
		return Mode(s), nil
	}
	return "", fmt.Errorf("auth %q: want on, off or auto", s)
}

// KeyCounter counts the keys that would be accepted now.
type KeyCounter interface {
	CountUsableAPIKeys(ctx context.Context, now time.Time) (int, error)
}

// Decision is whether a process checks keys, and the sentence it logs
// first to say so.
type Decision struct {
	Enforce bool
	Message string
	// Warn marks a decision that leaves a non-loopback address open.
	Warn bool
}

// Decide applies mode to a process about to listen on addr.
func Decide(ctx context.Context, mode Mode, addr string, keys KeyCounter, now time.Time) (Decision, error) {
	loopback := IsLoopback(addr)
	if mode == ModeOff {
		if loopback {
			return Decision{Message: "auth off (--auth off): every route is open to whoever reaches " + addr}, nil
		}
		return Decision{Warn: true, Message: "auth off (--auth off) on " + addr + ", which is not loopback: anyone who reaches it may submit, cancel and re-run tasks; only do this behind a proxy that authenticates"}, nil
	}
	n, err := keys.CountUsableAPIKeys(ctx, now)
	if err != nil {
		return Decision{}, fmt.Errorf("auth: %w", err)
	}
	switch {
	case n > 0:
		return Decision{Enforce: true, Message: fmt.Sprintf("auth on: %d API keys; every route but /livez and /readyz needs a bearer token", n)}, nil
	case !loopback:
		return Decision{}, fmt.Errorf("auth: %s is not a loopback address and no API key exists: create one with `ax key create --name admin --role admin`, or bind to 127.0.0.1", addr)
	case mode == ModeOn:
		return Decision{Enforce: true, Message: "auth on (--auth on) with no API key: every route but /livez and /readyz answers 401 until `ax key create`"}, nil
	default:
		return Decision{Message: "auth off: bound to loopback " + addr + " with no API key, so the API is open to this machine; `ax key create` and a restart turn it on"}, nil
	}
}

// IsLoopback reports whether addr (host:port) can only be reached from
// this machine: a loopback IP or "localhost". An empty host means every
// interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
