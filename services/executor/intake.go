package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

const (
	// keepAliveAge is how long a held message goes without InProgress,
	// well within bus.ExecAckWait.
	keepAliveAge = 1500 * time.Millisecond
	// idleWait bounds a doorbell wait, in case a doorbell was lost.
	idleWait = time.Second
)

// intake pulls one task type's lanes: for every lane the node's own
// subject (the shards it owns) and the type's shared subject. The own
// lanes are fed by long-lived pulls (feed); the shared ones, which every
// executor of the type drains, are fetched on demand, woken by a doorbell.
// With one fetcher (strict lane order) every lane is fetched on demand:
// feeds fill independently, so a lower lane's work could be seen before a
// higher lane's published earlier.
type intake struct {
	e    *Executor
	p    *pool
	srcs []source
	bell chan struct{}
	subs []*nats.Subscription
	// rungAt[i] is when a doorbell last rang for source i and emptyAt[i]
	// when a fetch last found it empty (unix ns). A source found empty with
	// no doorbell since is not asked again for idleWait, which saves the
	// round trips of polling empty lanes; work that arrives without a
	// doorbell (redeliveries) is still seen within idleWait.
	rungAt  []atomic.Int64
	emptyAt []atomic.Int64
	// spills[i] holds the dispatches a fetch of source i brought beyond
	// what its fetcher asked for (a message of several, events.
	// TaskDispatches), for any fetcher to take: kept in one fetcher's
	// queues they would wait for that fetcher's slots while the others
	// held theirs idle.
	spills []spill
}

// source is one consumer the intake pulls: a lane of the node's own
// subject or of the shared one.
type source struct {
	c       jetstream.Consumer
	lane    int // rank: 0 high
	subject string
	own     bool
	// feed, when set, holds what the long-lived pull of an own lane
	// delivered; fetching from it is taking from memory.
	feed *feed
}

// head is a fetched message not yet taken.
type head struct {
	msg       jetstream.Msg
	task      events.TaskDispatched
	fetchedAt time.Time
	lastKeep  time.Time
	// run, for a child taken up where it was released, is what its
	// release read under the row lock: its claim reads no row (here.go).
	run *store.RunFields
}

func (e *Executor) newIntake(ctx context.Context, p *pool) (*intake, error) {
	in := &intake{e: e, p: p, bell: make(chan struct{}, 1)}
	own := events.NodeToken(e.cfg.Node)
	bells := []string{events.SharedToken}
	if in.strict() {
		bells = append(bells, own)
	}
	for rank, lane := range contracts.Priorities {
		for _, token := range []string{own, events.SharedToken} {
			c, err := e.conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, bus.ExecConsumerConfig(p.spec.Name, lane, token))
			if err != nil {
				in.close()
				return nil, fmt.Errorf("declare %s consumer for %s: %w", lane, p.spec.Name, err)
			}
			src := source{c: c, lane: rank, subject: events.ExecSubject(p.spec.Name, lane, token), own: token == own}
			if src.own && !in.strict() {
				if src.feed, err = in.startFeed(src, feedSize(p.spec.Concurrency)); err != nil {
					in.close()
					return nil, err
				}
			}
			in.srcs = append(in.srcs, src)
		}
	}
	in.rungAt = make([]atomic.Int64, len(in.srcs))
	in.emptyAt = make([]atomic.Int64, len(in.srcs))
	in.spills = make([]spill, len(in.srcs))
	for _, token := range bells {
		sub, err := e.conn.NC.Subscribe(events.ExecDoorbell(p.spec.Name, token), func(m *nats.Msg) {
			for i, src := range in.srcs {
				if m.Subject == src.subject {
					in.rungAt[i].Store(time.Now().UnixNano())
				}
			}
			in.ring()
		})
		if err != nil {
			in.close()
			return nil, fmt.Errorf("doorbell for %s: %w", p.spec.Name, err)
		}
		in.subs = append(in.subs, sub)
	}
	return in, nil
}

func (in *intake) ring() {
	select {
	case in.bell <- struct{}{}:
	default:
	}
}

// close stops the doorbells and the feeds, handing back what the feeds
// held; it may be called more than once.
func (in *intake) close() {
	for _, sub := range in.subs {
		_ = sub.Unsubscribe()
	}
	ctx, cancel := context.WithTimeout(context.Background(), feedCloseWait)
	defer cancel()
	for i, src := range in.srcs {
		if src.feed != nil {
			src.feed.close(ctx)
		}
		if in.spills != nil {
			for _, h := range in.spills[i].take(math.MaxInt) {
				_ = h.msg.Nak()
			}
		}
	}
}

// feedCloseWait bounds how long closing waits for a feed's consume to end.
const feedCloseWait = 5 * time.Second

// tend keeps the feeds' held messages alive while the fetchers may all be
// waiting for slots, and restarts a feed whose consume ended by itself,
// until ctx ends.
func (in *intake) tend(ctx context.Context) error {
	t := time.NewTicker(keepAliveAge / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			for i, src := range in.srcs {
				if src.feed != nil {
					src.feed.keepAlive(now)
					in.revive(ctx, src)
				}
				in.spills[i].keepAlive(now)
			}
			in.e.keepFusedAlive(in.p, now)
		}
	}
}

// watchQueue samples the type's queue length every heartbeat until ctx
// ends. It is a loop of its own, not part of tend: a slow JetStream answer
// must not hold back the keep-alives of the messages the feeds hold.
func (in *intake) watchQueue(ctx context.Context) error {
	t := time.NewTicker(in.e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		in.sampleQueue(ctx)
		select {
		case <-ctx.Done():
			// Intake stopped: what waited for this node is handed back.
			metrics.ExecutorQueueLength.WithLabelValues(in.p.spec.Name).Set(0)
			return nil
		case <-t.C:
		}
	}
}

// sampleQueue sets the type's queue length from JetStream's view of its
// consumers: on the node's own subjects every message not yet claimed
// (pending, or delivered and held by a feed or a fetcher), on the shared
// subjects the pending ones. A consumer that cannot be read leaves the
// gauge as it was.
func (in *intake) sampleQueue(ctx context.Context) {
	var n uint64
	for _, src := range in.srcs {
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := src.c.Info(ictx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				in.e.logger.Debug("read consumer for the queue length", "subject", src.subject, "err", err)
			}
			return
		}
		n += info.NumPending
		if src.own {
			n += uint64(info.NumAckPending)
		}
	}
	metrics.ExecutorQueueLength.WithLabelValues(in.p.spec.Name).Set(float64(n))
}

const (
	// maxClaimBatch bounds how many tasks one fetcher claims in one
	// transaction.
	maxClaimBatch = 128
	// slotGather is how long a fetcher that found its pool full collects
	// freed slots before claiming.
	slotGather = time.Millisecond
)

// fetchLoop takes pool slots (at least one, then whatever else is free),
// then as many of the best waiting tasks, and claims them together, until
// ctx ends. Messages it holds on exit are handed back at once. While the
// type has a cluster-wide limit, fetcher 0 claims its tasks one by one as
// the limit makes room (takeLimited) and the others stand by.
func (in *intake) fetchLoop(ctx context.Context, fetcher int) error {
	queues := make([][]*head, len(in.srcs))
	defer handBack(queues)
	for {
		if in.e.settings(ctx, in.p).Concurrency > 0 {
			if fetcher == 0 && in.takeLimited(ctx, queues) {
				continue
			}
			// Tasks fetched before the limit was set go back to their
			// lanes, for the limited fetcher.
			handBack(queues)
			if !sleepCtx(ctx, typeCacheTTL) {
				return nil
			}
			continue
		}
		saturated := false
		select {
		case in.p.slots <- struct{}{}:
		default:
			saturated = true
			if !in.waitSlot(ctx, queues) {
				return nil
			}
		}
		want := 1
	more:
		for want < maxClaimBatch {
			select {
			case in.p.slots <- struct{}{}:
				want++
			default:
				break more
			}
		}
		if saturated && want < maxClaimBatch {
			// The pool was full: slots come back a batch of outcomes at a
			// time. Gathering them for a moment makes one claim of many
			// instead of many claims of one; an idle pool never waits here.
			gather := time.NewTimer(slotGather)
		gathering:
			for want < maxClaimBatch {
				select {
				case in.p.slots <- struct{}{}:
					want++
				case <-gather.C:
					break gathering
				}
			}
			gather.Stop()
		}
		// A fetcher waiting here for work must not take it once the type
		// has a limit: the limited fetcher claims it (takeLimited).
		hs := in.next(ctx, queues, want, func() bool { return in.e.settings(ctx, in.p).Concurrency > 0 })
		for range want - len(hs) {
			<-in.p.slots
		}
		if len(hs) == 0 {
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		in.e.takeBatch(ctx, in.p, hs)
	}
}

// waitSlot takes a slot of the full pool, keeping the messages the fetcher
// holds alive meanwhile (the pool may stay full for longer than the ack
// wait); false means ctx ended.
func (in *intake) waitSlot(ctx context.Context, queues [][]*head) bool {
	tick := time.NewTicker(keepAliveAge / 2)
	defer tick.Stop()
	for {
		select {
		case in.p.slots <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
			in.keepAlive(queues)
		}
	}
}

// next returns up to want tasks to run next, best first: repeatedly the
// front of the highest lane, where a task overdue by k×AgingAfter counts k
// lanes higher. It blocks while every lane is empty and returns nothing
// when ctx ends, or when stop (if set) says so before a fetch.
func (in *intake) next(ctx context.Context, queues [][]*head, want int, stop func() bool) []*head {
	for {
		if stop != nil && stop() {
			return nil
		}
		select {
		case <-in.bell: // drained before fetching; a later ring is new work
		default:
		}
		held := 0
		for _, q := range queues {
			held += len(q)
		}
		// Every lane shows at least its head, so aging can compare them;
		// beyond that, fetch only what this batch can use. With one fetcher
		// (strict lane order) the lowest lane is read first: work is
		// published in order, so a higher lane read afterwards holds
		// everything published before the lower heads already in hand.
		for k := range in.srcs {
			i := k
			if in.strict() {
				i = len(in.srcs) - 1 - k
			}
			if len(queues[i]) == 0 {
				queues[i] = in.fetchLane(ctx, i, max(1, want-held), false)
				held += len(queues[i])
			}
		}
		var out []*head
		for len(out) < want {
			best := in.pick(queues)
			if best < 0 {
				break
			}
			// A higher lane found empty may have been filled since: look
			// again before taking lower work if its doorbell rang or, in
			// strict order, if it was last read before this head was.
			refilled := false
			for h, src := range in.srcs {
				if src.lane >= in.srcs[best].lane || len(queues[h]) > 0 {
					continue
				}
				stale := in.strict() && in.emptyAt[h].Load() < queues[best][0].fetchedAt.UnixNano()
				if stale || in.mayHold(h) {
					queues[h] = in.fetchLane(ctx, h, want-len(out), stale)
					refilled = refilled || len(queues[h]) > 0
				}
			}
			if refilled {
				continue
			}
			out = append(out, queues[best][0])
			queues[best] = queues[best][1:]
			if len(queues[best]) == 0 && len(out) < want {
				// The lane may hold more that outranks the other lanes.
				queues[best] = in.fetchLane(ctx, best, want-len(out), false)
			}
		}
		in.keepAlive(queues)
		if len(out) > 0 || ctx.Err() != nil {
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-in.bell:
		case <-time.After(idleWait):
		}
	}
}

// ringSlack allows for a doorbell that arrives a moment before its
// message can be fetched: an empty fetch that soon after a ring does not
// make the lane count as empty.
const ringSlack = 5 * time.Millisecond

// mayHold reports whether lane i is worth a fetch: it was not found empty
// lately, or a doorbell rang for it since.
func (in *intake) mayHold(i int) bool {
	if f := in.srcs[i].feed; f != nil {
		return f.len() > 0 || in.spills[i].len() > 0
	}
	if in.spills[i].len() > 0 {
		return true
	}
	empty := in.emptyAt[i].Load()
	return time.Since(time.Unix(0, empty)) >= idleWait || in.rungAt[i].Load() >= empty-int64(ringSlack)
}

// strict reports whether tasks must start in strict lane order (one
// fetcher per type).
func (in *intake) strict() bool { return in.e.cfg.Fetchers == 1 }

// fetchLane fetches up to n messages of source i unless it is known empty
// (and not forced); a fed lane gives what it holds, the children released
// here first (here.go): they finish work already begun.
func (in *intake) fetchLane(ctx context.Context, i, n int, force bool) []*head {
	if f := in.srcs[i].feed; f != nil {
		got := in.spills[i].take(n)
		if len(got) < n {
			got = append(got, f.take(n-len(got))...)
		}
		return got
	}
	if got := in.spills[i].take(n); len(got) > 0 {
		return got
	}
	if !force && !in.mayHold(i) {
		return nil
	}
	got := in.fetch(ctx, in.srcs[i].c, n)
	if len(got) == 0 {
		in.emptyAt[i].Store(time.Now().UnixNano())
	}
	if len(got) > n {
		in.spills[i].put(got[n:])
		got = got[:n]
		in.ring() // a fetcher waiting for work may take the rest
	}
	return got
}

func (in *intake) fetch(ctx context.Context, c jetstream.Consumer, n int) []*head {
	if ctx.Err() != nil {
		return nil
	}
	batch, err := c.FetchNoWait(n)
	if err != nil {
		in.e.logger.Warn("fetch failed", "type", in.p.spec.Name, "err", err)
		return nil
	}
	var out []*head
	now := time.Now()
	for msg := range batch.Messages() {
		ds, err := bus.Dispatches(msg, in.e.conn.JS)
		if err != nil {
			in.e.logger.Error("dropping undecodable dispatch", "type", in.p.spec.Name, "err", err)
			_ = msg.Term()
			continue
		}
		for _, d := range ds {
			out = append(out, &head{msg: d.Msg, task: d.Task, fetchedAt: now, lastKeep: now})
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.Canceled) {
		in.e.logger.Debug("fetch ended", "type", in.p.spec.Name, "err", err)
	}
	return out
}

// pick chooses among the lanes' fronts: the lowest effective lane wins,
// where a task overdue by k×AgingAfter is promoted k lanes (never above
// high); ties go to the task due first, then to the higher lane. So a task
// that waited long enough overtakes every task of a higher lane that became
// due after it.
func (in *intake) pick(queues [][]*head) int {
	now := in.e.clock.Now().UnixMilli()
	aging := in.e.cfg.AgingAfter.Milliseconds()
	best := -1
	var bestLane int
	var bestDue int64
	for i, q := range queues {
		if len(q) == 0 {
			continue
		}
		h := q[0]
		lane := in.srcs[i].lane
		eff := lane
		if overdue := now - h.task.NextRunTimeMs; overdue > 0 {
			eff = max(0, lane-int(overdue/aging))
		}
		due := h.task.NextRunTimeMs
		if best < 0 || eff < bestLane || (eff == bestLane && due < bestDue) {
			best, bestLane, bestDue = i, eff, due
		}
	}
	return best
}

// keepAlive tells JetStream that long-held messages are still being
// worked on, so they are not redelivered elsewhere meanwhile.
func (in *intake) keepAlive(queues [][]*head) {
	now := time.Now()
	for _, q := range queues {
		keepHeadsAlive(q, now)
	}
}
