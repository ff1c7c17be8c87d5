package httpedge

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
)

// sweepEvery is how often full buckets are dropped. A full bucket behaves
// exactly like a new one, so dropping it changes no answer and keeps the
// map as small as the set of recent callers.
const sweepEvery = time.Minute

// Limiter is a token bucket per caller for the /v1/ routes. The operational
// endpoints (/livez, /readyz, /metrics) are never limited: probes and
// scrapes must not be refused because a client is busy.
type Limiter struct {
	limit rate.Limit
	burst int
	key   func(*http.Request) string
	clock clock.Clock

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

// NewLimiter builds a limiter with cfg's rate, burst, key and clock.
func NewLimiter(cfg Config) *Limiter {
	l := &Limiter{limit: rate.Limit(cfg.RateLimit), burst: cfg.RateBurst, key: cfg.RateKey, clock: cfg.Clock,
		buckets: map[string]*rate.Limiter{}}
	if l.burst <= 0 {
		l.burst = max(1, int(math.Ceil(cfg.RateLimit)))
	}
	if l.key == nil {
		l.key = RemoteIP
	}
	if l.clock == nil {
		l.clock = clock.System{}
	}
	return l
}

// RemoteIP is the default rate-limit key: the address the connection comes
// from. Behind a proxy every caller shares it; pass a RateKey there.
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Wrap limits the /v1/ requests that reach next.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		if wait := l.take(l.key(r)); wait > 0 {
			secs := int(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			WriteProblem(w, contracts.NewProblem(http.StatusTooManyRequests, contracts.CodeRateLimited,
				fmt.Sprintf("more than %g requests per second (burst %d): retry in %d s", float64(l.limit), l.burst, secs)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// take spends a token of key's bucket and returns 0, or returns how long
// until a token is there and spends nothing.
func (l *Limiter) take(key string) time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		for k, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return 0
	}
	res := b.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	res.CancelAt(now)
	return max(wait, time.Nanosecond)
}

// Buckets is how many callers have a bucket now (for tests).
func (l *Limiter) Buckets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
