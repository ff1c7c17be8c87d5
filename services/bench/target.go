package bench

import (
	"net"
	"net/url"
	"slices"

	"github.com/go-sql-driver/mysql"
)

// target is the ax deployment one run measures.
type target struct {
	api     string
	natsURL string
	// dsn opens the deployment's database, for drain and quiet checks.
	dsn   string
	procs []procRef
	// stop ends what the run started; nothing in remote mode.
	stop func()
}

// remoteTarget measures a running deployment: the processes named with
// --pid, and the local MySQL, Redis and NATS servers found by name.
func remoteTarget(cfg *Config) *target {
	t := &target{api: cfg.API, natsURL: cfg.NATSURL, dsn: cfg.MySQLDSN, stop: func() {}}
	for _, p := range cfg.PIDs {
		t.procs = append(t.procs, procRef{name: p.Name, pid: p.PID, rss: true})
	}
	named := func(name string) bool {
		return slices.ContainsFunc(cfg.PIDs, func(p NamedPID) bool { return p.Name == name })
	}
	if !named("nats") {
		t.procs = append(t.procs, infraProcs("nats", urlPort(cfg.NATSURL), "nats-server")...)
	}
	t.procs = append(t.procs, infraFor(cfg, named)...)
	return t
}

// infraFor finds the local MySQL and Redis servers, unless --pid named them.
func infraFor(cfg *Config, named func(string) bool) []procRef {
	var out []procRef
	if !named("mysql") {
		port := ""
		if c, err := mysql.ParseDSN(cfg.MySQLDSN); err == nil {
			port = addrPort(c.Addr)
		}
		out = append(out, infraProcs("mysql", port, "mariadbd", "mysqld")...)
	}
	if !named("redis") {
		out = append(out, infraProcs("redis", addrPort(cfg.RedisAddr), "redis-server")...)
	}
	return out
}

// infraProcs finds a shared server by executable name, preferring the one
// whose command line mentions its port. Its CPU time is reported, not its
// RSS (see procRef.rss).
func infraProcs(name, port string, comms ...string) []procRef {
	var out []procRef
	for _, pid := range FindProcs(port, comms...) {
		out = append(out, procRef{name: name, pid: pid})
	}
	return out
}

func addrPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return port
}

func urlPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Port()
}
