// Package bus is ax's NATS JetStream plumbing: connecting, declaring the
// streams named in package events, publishing batches asynchronously with
// acknowledgements awaited together, and consuming durable consumers through
// watermill routers (recoverer, retry and correlation middleware).
package bus

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/events"
)

// Conn is a NATS connection with its JetStream context.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// URL is the server list, passwords hidden (for logs).
	URL string
	// url and opts dial more connections alike (Dial).
	url  string
	opts []nats.Option
}

// Connect dials NATS and retries reconnects forever: a NATS restart must not
// kill a service, only pause it.
// opts carry credentials and TLS.
func Connect(ctx context.Context, url, name string, opts ...nats.Option) (*Conn, error) {
	c := &Conn{URL: Redact(url), url: url, opts: opts}
	nc, err := c.Dial(name)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", Redact(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream on %s: %w", Redact(url), err)
	}
	c.NC, c.JS = nc, js
	return c, nil
}

// Dial opens another connection to the same servers with the same
// credentials and TLS, named name.
func (c *Conn) Dial(name string) (*nats.Conn, error) {
	return nats.Connect(c.url, append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}, c.opts...)...)
}

// Close drains and closes the connection.
func (c *Conn) Close() {
	if c == nil || c.NC == nil {
		return
	}
	_ = c.NC.Drain()
	c.NC.Close()
}

// StreamOptions tune the streams ax declares.
type StreamOptions struct {
	// Replicas is the stream replication factor (3 in a production cluster).
	Replicas int
	// EventsMaxAge bounds how long transfer events are kept (7 days);
	// at least EventsMaxAgeMin.
	EventsMaxAge time.Duration
	// DuplicateWindow is how long a Nats-Msg-Id is remembered.
	DuplicateWindow time.Duration
}

// EventsMaxAgeMin is the shortest EventsMaxAge: JetStream refuses a
// stream whose de-duplication window (2 minutes) is longer than its age
// limit, and the relay's re-publishes after a hand-over rely on that window.
const EventsMaxAgeMin = 2 * time.Minute

func (o *StreamOptions) defaults() {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.EventsMaxAge <= 0 {
		o.EventsMaxAge = 7 * 24 * time.Hour
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 2 * time.Minute
	}
}

// EnsureStreams creates or updates AX_EVENTS and AX_WORK.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, o StreamOptions) error {
	o.defaults()
	cfgs := []jetstream.StreamConfig{
		{
			Name: events.StreamEvents, Subjects: []string{events.EventsSubjects},
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			MaxAge: o.EventsMaxAge, Duplicates: o.DuplicateWindow, Replicas: o.Replicas,
		},
		{
			Name: events.StreamWork, Subjects: []string{events.WorkSubjects},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
			Duplicates: o.DuplicateWindow, Replicas: o.Replicas,
		},
	}
	for _, cfg := range cfgs {
		// Most processes find the streams as declared: they leave them
		// alone rather than send an update for nothing, which also keeps
		// them clear of a race inside nats-server between a stream update
		// and consumers being created on it.
		if s, err := js.Stream(ctx, cfg.Name); err == nil && sameStream(s.CachedInfo().Config, cfg) {
			continue
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("declare stream %s: %w", cfg.Name, err)
		}
	}
	// A durable consumer nobody pulls any more would keep its pending
	// count growing (and alarming) for ever.
	err := js.DeleteConsumer(ctx, events.StreamEvents, events.ObsoleteConsumerDispatcherReady)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("remove obsolete consumer %s: %w", events.ObsoleteConsumerDispatcherReady, err)
	}
	return nil
}

// sameStream reports whether have already has every setting want declares.
// allow_batched, which streams declared by an earlier ax carry, is left as
// it is: plain publishes do not use it and are not hindered by it.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && have.MaxAge == want.MaxAge && have.Duplicates == want.Duplicates &&
		max(have.Replicas, 1) == max(want.Replicas, 1)
}

// Msg is one message to publish.
type Msg struct {
	Subject       string
	ID            string // becomes Nats-Msg-Id when set
	EventType     string
	CorrelationID string
	Data          []byte
	// TraceParent, when set, goes in the traceparent header (tracing).
	TraceParent string
}

// PublishBatch publishes every message asynchronously and waits for all the
// acknowledgements, so a batch costs about one round trip instead of one per
// message. It returns an error if any message was not stored; messages with
// an ID are de-duplicated by the stream, so publishing the batch again is
// safe.
func PublishBatch(ctx context.Context, js jetstream.JetStream, msgs []Msg) error {
	ctx, cancel := boundedWait(ctx)
	defer cancel()
	nms := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		nms[i] = natsMsg(m)
	}
	return publishAsync(ctx, js, nms)
}

// Publish is PublishBatch on the connection's JetStream context.
func (c *Conn) Publish(ctx context.Context, msgs []Msg) error {
	return PublishBatch(ctx, c.JS, msgs)
}

// publishWaitMax bounds how long a publish waits for JetStream's answers
// when the caller set no deadline: an answer lost without the connection
// dropping (which fails the wait at once) must not stall a relay, timer or
// dispatcher pass for ever. The caller publishes again.
var publishWaitMax = 30 * time.Second

func boundedWait(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, publishWaitMax)
}

// natsMsg builds m's message. Its headers' values share one backing array,
// each a slice of capacity one (a later Add copies rather than overwrite a
// neighbour), and the map is sized for them: a message per event alone or
// per dispatch made this the relay's busiest allocation site. Header keys are case-sensitive
// in NATS, so assigning them is what Header.Set does.
func natsMsg(m Msg) *nats.Msg {
	fields := [...][2]string{
		{events.HeaderMsgID, m.ID}, {events.HeaderEventType, m.EventType},
		{events.HeaderCorrelationID, m.CorrelationID}, {events.HeaderTraceParent, m.TraceParent},
	}
	n := 0
	for _, f := range fields {
		if f[1] != "" {
			n++
		}
	}
	nm := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: make(nats.Header, n)}
	vals := make([]string, 0, n)
	for _, f := range fields {
		if f[1] != "" {
			vals = append(vals, f[1])
			nm.Header[f[0]] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	return nm
}

// publishAsync publishes msgs asynchronously and waits for every
// acknowledgement.
func publishAsync(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, nm := range msgs {
		f, err := js.PublishMsgAsync(nm)
		if err != nil {
			return fmt.Errorf("publish %s: %w", nm.Subject, err)
		}
		futures = append(futures, f)
	}
	// A dropped connection fails every message at once: one line says so,
	// rather than one per message.
	failed := 0
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if failed++; first == nil {
				first = fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failed > 1 {
		return fmt.Errorf("%d of %d publishes failed, the first: %w", failed, len(futures), first)
	}
	return first
}

// Redact hides the passwords of a NATS URL list (nats://user:pass@host,
// ...), for logs and errors.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
