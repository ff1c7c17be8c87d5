package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/axsched/ax/events"
)

// JetStream fast batches (nats-server 2.14+, streams with allow_batched):
// the messages of a batch carry its ID, their place in it and an operation
// in their reply subject, <prefix>.<batch>.<flow>.<gap>.<seq>.<op>.$FI, and
// the server answers the batch as a whole (a PubAck once the last message
// is stored, counting how many of them it handled) instead of each message.
// A relay pass of a few hundred events then costs the server and ax two
// replies instead of a few hundred.
const (
	// fastBatchMin is the smallest group sent as a batch: a batch costs two
	// replies (the flow settings answering its first message, and the
	// PubAck), so two messages gain nothing.
	fastBatchMin = 3
	// fastBatchFlow is how often, in messages, the server may send flow
	// acknowledgements; ax does not throttle on them (a batch is never
	// larger than one relay or dispatch pass), so the fewer the better.
	// The server caps it at 500.
	fastBatchFlow = 500
	// fastBatchOff is how long a stream that refused a batch is sent plain
	// publishes before batches are tried again.
	fastBatchOff = time.Minute
)

// errCodeBatchDisabled is JetStream's error for a stream that does not
// allow fast batches (JSBatchPublishDisabledErr).
const errCodeBatchDisabled = 10205

// Fast batch operations, as nats-server numbers them.
const (
	fastOpStart  = 0
	fastOpAppend = 1
	fastOpCommit = 2
)

// fastPublisher sends groups of messages bound for one stream as fast
// batches over the connection, with one subscription for every batch's
// replies.
type fastPublisher struct {
	nc     *nats.Conn
	prefix string // "<inbox>.": a batch's replies arrive under prefix+ID
	logger *slog.Logger

	mu      sync.Mutex
	sub     *nats.Subscription
	waiting map[string]chan fastReply
	// off holds, per stream, until when plain publishes are used instead.
	off map[string]time.Time
}

// fastReply is the server's final answer to a batch: a PubAck (Count
// messages handled, in order, from the first) or an error.
type fastReply struct {
	Batch string    `json:"batch"`
	Count int       `json:"count"`
	Error *apiError `json:"error"`
	Type  string    `json:"type"` // set on flow messages only

	// lost is set instead when no answer will come: the connection
	// dropped (the server forgets a batch it did not finish), or no
	// stream takes the subject.
	lost error
}

type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (code %d, error %d)", e.Description, e.Code, e.ErrCode)
}

func newFastPublisher(nc *nats.Conn) *fastPublisher {
	return &fastPublisher{nc: nc, prefix: nc.NewInbox() + ".", logger: slog.Default().With("component", "bus"),
		waiting: map[string]chan fastReply{}, off: map[string]time.Time{}}
}

// streamOf names the stream a subject of ax's is stored in.
func streamOf(subject string) string {
	switch {
	case strings.HasPrefix(subject, strings.TrimSuffix(events.EventsSubjects, ">")):
		return events.StreamEvents
	case strings.HasPrefix(subject, strings.TrimSuffix(events.WorkSubjects, ">")):
		return events.StreamWork
	}
	return ""
}

// usable reports whether batches go to stream now.
func (f *fastPublisher) usable(stream string) bool {
	if stream == "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.off[stream]
	if ok && time.Now().After(until) {
		delete(f.off, stream)
		ok = false
	}
	return !ok
}

func (f *fastPublisher) turnOff(stream string, why error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.off[stream]; !ok {
		f.logger.Warn("stream refused a fast batch; publishing to it one message at a time for a while",
			"stream", stream, "for", fastBatchOff, "err", why)
	}
	f.off[stream] = time.Now().Add(fastBatchOff)
}

// subscribe opens the replies' subscription on first use.
func (f *fastPublisher) subscribe() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sub != nil {
		return nil
	}
	sub, err := f.nc.Subscribe(f.prefix+"*.>", f.onReply)
	if err != nil {
		return fmt.Errorf("subscribe to fast batch replies: %w", err)
	}
	f.sub = sub
	// As nats.go does for asynchronous publishes: whatever waits when the
	// connection drops is failed, and the caller publishes it again.
	status := f.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	go func() {
		for st := range status {
			f.failAll(nats.ErrDisconnected)
			if st == nats.CLOSED {
				return
			}
		}
	}()
	return nil
}

func (f *fastPublisher) failAll(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ch := range f.waiting {
		delete(f.waiting, id)
		ch <- fastReply{lost: err}
	}
}

// onReply hands a batch its final answer; flow messages, and answers to
// a batch nobody waits for any more, are dropped.
func (f *fastPublisher) onReply(m *nats.Msg) {
	id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, f.prefix), ".")
	var r fastReply
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// No stream takes the subject: the plain publish says so properly.
		r.lost = nats.ErrNoResponders
	} else if err := json.Unmarshal(m.Data, &r); err != nil {
		f.logger.Debug("undecodable fast batch reply", "subject", m.Subject, "err", err)
		return
	}
	if r.Type != "" {
		// Flow acknowledgements and gap or error notices: the PubAck that
		// ends the batch says what was stored.
		return
	}
	f.mu.Lock()
	ch, ok := f.waiting[id]
	delete(f.waiting, id)
	f.mu.Unlock()
	if ok {
		ch <- r
	}
}

// inFlight is a batch sent and not yet answered.
type inFlight struct {
	id     string
	stream string
	msgs   []*nats.Msg
	reply  chan fastReply
}

// send publishes msgs (all bound for stream) as one batch. The server answers on
// the returned batch's channel.
func (f *fastPublisher) send(stream string, msgs []*nats.Msg) (*inFlight, error) {
	if err := f.subscribe(); err != nil {
		return nil, err
	}
	b := &inFlight{id: nuid.Next(), stream: stream, msgs: msgs, reply: make(chan fastReply, 1)}
	f.mu.Lock()
	f.waiting[b.id] = b.reply
	f.mu.Unlock()
	head := f.prefix + b.id + "." + strconv.Itoa(fastBatchFlow) + ".fail."
	for i, m := range msgs {
		op := fastOpAppend
		switch i {
		case 0:
			op = fastOpStart
		case len(msgs) - 1:
			op = fastOpCommit
		}
		m.Reply = head + strconv.Itoa(i+1) + "." + strconv.Itoa(op) + ".$FI"
		if err := f.nc.PublishMsg(m); err != nil {
			f.forget(b.id)
			return nil, fmt.Errorf("publish %s: %w", m.Subject, err)
		}
	}
	return b, nil
}

func (f *fastPublisher) forget(id string) {
	f.mu.Lock()
	delete(f.waiting, id)
	f.mu.Unlock()
}

// wait returns the messages of b to send again plainly: none when the
// batch went through whole, the tail after the last one the server
// handled when it ended the batch early, all of them when it answered
// with an error (a refused batch, or a refused message whose batch then
// ends without a word about the ones before it). Sending again is safe:
// the stream drops repeated Nats-Msg-Ids, and dispatches are fenced at
// the claim.
func (f *fastPublisher) wait(ctx context.Context, b *inFlight) ([]*nats.Msg, error) {
	select {
	case r := <-b.reply:
		var rest []*nats.Msg
		switch {
		case errors.Is(r.lost, nats.ErrNoResponders):
			rest = b.msgs
		case r.lost != nil:
			return nil, fmt.Errorf("fast batch of %d message(s) to %s: %w", len(b.msgs), b.stream, r.lost)
		case r.Error != nil:
			if r.Error.ErrCode == errCodeBatchDisabled {
				f.turnOff(b.stream, r.Error)
			}
			rest = b.msgs
		case r.Batch == "":
			// A server that does not know fast batches took every message
			// as a plain publish; only the first one's answer was seen.
			f.turnOff(b.stream, errors.New("the server answered a batch message as a plain publish"))
			rest = b.msgs
		case r.Count < len(b.msgs):
			rest = b.msgs[max(r.Count, 0):]
		}
		for _, m := range rest {
			m.Reply = ""
		}
		return rest, nil
	case <-ctx.Done():
		f.forget(b.id)
		return nil, fmt.Errorf("fast batch of %d message(s) to %s: %w", len(b.msgs), b.stream, ctx.Err())
	}
}
