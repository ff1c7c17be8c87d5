package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestRandomizedRelayLosesNoCommittedRow checks the relay, with and
// without gap tracking, against the table row by row: concurrent writers
// commit history rows after random delays (some longer than the gap
// grace, so their rows turn up in holes already passed) or roll them back,
// publishes fail before and after JetStream stored them, and the relays
// are stopped (their context cancelled) or lose their lease to a standby
// again and again. Every committed row's event must be on the stream, and
// no rolled-back one.
//
// 100,000 rows per mode; 5,000 with -short (more if the relays have not
// been handed over five times by then).
func TestRandomizedRelayLosesNoCommittedRow(t *testing.T) {
	rows := 100_000
	if testing.Short() {
		rows = 5_000
	}
	for _, mode := range []struct {
		name string
		cfg  outbox.Config
	}{
		{"gap tracking", outbox.Config{GapGrace: 5 * time.Millisecond}},
		// The longest commit delay below is 300 ms: within Settle.
		{"settle window", outbox.Config{NoGapTracking: true, Settle: 500 * time.Millisecond}},
	} {
		t.Run(mode.name, func(t *testing.T) { randomizedRelay(t, mode.cfg, rows) })
	}
}

func randomizedRelay(t *testing.T, cfg outbox.Config, want int) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	cfg.Batch, cfg.PollInterval, cfg.LeaseTTL = 500, 50*time.Millisecond, 300*time.Millisecond
	relays := newRelayPool(t, cfg, st, conn)
	relays.start()
	relays.start()

	start := time.Now()
	var committed, rolledBack atomic.Int64
	// The writers go on past want until the relays have been handed over
	// minHandOvers times: a short run (-short) hands over as often.
	var handOvers atomic.Int64
	const writers, minHandOvers = 24, 5
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for (committed.Load() < int64(want) || handOvers.Load() < minHandOvers) && !t.Failed() {
				n := writeRandomly(t, st)
				if n > 0 {
					committed.Add(int64(n))
				} else {
					rolledBack.Add(int64(-n))
				}
			}
		})
	}
	chaosDone := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		for {
			select {
			case <-chaosDone:
				return
			case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond):
			}
			if rand.IntN(2) == 0 {
				relays.stopOne() // drains and releases its lease
				relays.start()
			} else {
				// The holder loses its lease: a standby takes it over from
				// the stored position, the holder finds out at its renewal.
				_, err := st.DB().Exec(`UPDATE event_relay SET holder = '', lease_until = NULL WHERE name = 'task_history'`)
				require.NoError(t, err)
			}
			handOvers.Add(1)
		}
	})
	wg.Wait()
	close(chaosDone)
	chaos.Wait()
	t.Logf("%d rows committed, %d rolled back by %d writers in %s; %d relay stops or lease losses",
		committed.Load(), rolledBack.Load(), writers, time.Since(start).Round(time.Millisecond), handOvers.Load())
	require.GreaterOrEqual(t, handOvers.Load(), int64(minHandOvers), "the relays were handed over several times")

	ids := testenv.Column[string](t, st.DB(), `SELECT event_id FROM task_history`)
	require.EqualValues(t, committed.Load(), len(ids))
	seen := newStreamSeen(t, conn.JS)
	waitWhileProgressing(t, st, seen, ids)
	relays.stopAll()
	seen.catchUp(t)
	require.Zero(t, seen.missing(ids))
	require.Len(t, seen.ids, len(ids), "nothing on the stream that did not commit")
	t.Logf("%d publishes failed on purpose; %d events on the stream more than once", relays.faults.Load(), seen.repeats())
}

// waitWhileProgressing waits until every committed row's event is on the
// stream, for as long as the relays keep publishing the missing ones: a
// slow machine makes the test slower, a lost row makes it fail (no
// progress for 30 s), with where the relay stands.
func waitWhileProgressing(t *testing.T, st *store.Store, seen *streamSeen, ids []string) {
	last, deadline := len(ids)+1, time.Now().Add(30*time.Second)
	for {
		seen.catchUp(t)
		m := seen.missing(ids)
		if m == 0 {
			return
		}
		if m < last {
			last, deadline = m, time.Now().Add(30*time.Second)
		}
		if time.Now().After(deadline) {
			var cursor int64
			var watched string
			require.NoError(t, st.DB().QueryRow(`SELECT last_id, COALESCE(watched, '') FROM event_relay`).Scan(&cursor, &watched))
			var first int64
			for _, id := range ids {
				if seen.ids[id] == 0 {
					require.NoError(t, st.DB().QueryRow(`SELECT id FROM task_history WHERE event_id = ?`, id).Scan(&first))
					break
				}
			}
			t.Fatalf("%d committed rows never reached the stream (one is row %d); stored cursor %d, watched holes %.200s",
				m, first, cursor, watched)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeRandomly writes 1..20 history rows in one transaction, waits a
// random while before it commits (mostly not at all, now and then up to
// 300 ms), and rolls one in twenty back. It returns the rows committed, or
// minus the rows rolled back.
func writeRandomly(t *testing.T, st *store.Store) int {
	ctx := context.Background()
	n := 1 + rand.IntN(20)
	tx, err := st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	args := make([]any, 0, n*11)
	for range n {
		args = append(args, ids.Add(1), "", "READY", 0, "random", "test", ulid.Make().String(), time.Now().UTC(), "ax.noop", 1, 1)
	}
	row := "(?" + strings.Repeat(", ?", 10) + ")"
	_, err = tx.ExecContext(ctx, `INSERT INTO task_history (task_id, from_status, to_status, attempt, reason,
		actor, event_id, created_at, task_type, priority, next_run_time) VALUES `+row+strings.Repeat(", "+row, n-1), args...)
	require.NoError(t, err)
	switch p := rand.IntN(100); {
	case p < 20:
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	case p < 25:
		time.Sleep(time.Duration(20+rand.IntN(280)) * time.Millisecond)
	}
	if rand.IntN(20) == 0 {
		require.NoError(t, tx.Rollback())
		return -n
	}
	require.NoError(t, tx.Commit())
	return n
}

// relayPool runs relays that the test stops and starts at random; each
// fails one publish in twenty before it is sent and one in fifty after
// JetStream stored it.
type relayPool struct {
	t      *testing.T
	cfg    outbox.Config
	st     *store.Store
	conn   *bus.Conn
	mu     sync.Mutex
	stops  []context.CancelFunc
	wg     sync.WaitGroup
	n      int
	faults atomic.Int64
}

func newRelayPool(t *testing.T, cfg outbox.Config, st *store.Store, conn *bus.Conn) *relayPool {
	p := &relayPool{t: t, cfg: cfg, st: st, conn: conn}
	t.Cleanup(p.stopAll)
	return p
}

var errInjected = errors.New("publish failed on purpose")

func (p *relayPool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	r := outbox.New(withHolder(p.cfg, fmt.Sprintf("relay-%d", p.n)), p.st, p.conn, testenv.Logger(p.t))
	outbox.InjectPublishFaults(r, func(acked bool) error {
		if (!acked && rand.IntN(20) == 0) || (acked && rand.IntN(50) == 0) {
			p.faults.Add(1)
			return errInjected
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	p.stops = append(p.stops, cancel)
	p.wg.Go(func() { _ = r.Run(ctx) })
}

// stopOne stops the oldest relay.
func (p *relayPool) stopOne() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stops) > 0 {
		p.stops[0]()
		p.stops = p.stops[1:]
	}
}

func (p *relayPool) stopAll() {
	p.mu.Lock()
	for _, stop := range p.stops {
		stop()
	}
	p.stops = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// streamSeen reads AX_EVENTS as it grows and counts each event ID.
type streamSeen struct {
	c   jetstream.Consumer
	ids map[string]int
}

func newStreamSeen(t *testing.T, js jetstream.JetStream) *streamSeen {
	s, err := js.Stream(context.Background(), events.StreamEvents)
	require.NoError(t, err)
	c, err := s.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	return &streamSeen{c: c, ids: map[string]int{}}
}

// catchUp reads what the stream holds past what was read before.
func (s *streamSeen) catchUp(t *testing.T) {
	for {
		batch, err := s.c.Fetch(5000, jetstream.FetchMaxWait(200*time.Millisecond))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			for _, e := range testenv.MsgEvents(t, m) {
				s.ids[e.ID]++
			}
			n++
		}
		if n == 0 {
			return
		}
	}
}

func (s *streamSeen) missing(ids []string) int {
	n := 0
	for _, id := range ids {
		if s.ids[id] == 0 {
			n++
		}
	}
	return n
}

func (s *streamSeen) repeats() int {
	n := 0
	for _, c := range s.ids {
		if c > 1 {
			n++
		}
	}
	return n
}
