package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// fastBatchCheckedOn is the nats-server release whose fast batch wire
// format fastPublisher was checked against (server/stream.go getFastBatch
// and processJetStreamFastBatchMsg, server/jetstream_batching.go). The
// format is shown only by the server's own tests, so any other release
// must be checked again before it is pinned.
const fastBatchCheckedOn = "2.15.2"

// wireReply is one message the server sent to a batch's reply subject.
type wireReply struct {
	subject string
	status  string
	body    map[string]any
}

func (r wireReply) final() bool { _, flow := r.body["type"]; return !flow }

// sendRawBatch publishes bodies as one fast batch to subject the way
// fastPublisher.send does, with flow as the acknowledgement interval, and
// returns every reply until the batch's final answer (a reply without
// "type") or a 503. Message i's Nats-Msg-Id is msgIDs-i, msgIDs defaulting
// to the batch's ID.
func sendRawBatch(t *testing.T, nc *nats.Conn, subject string, flow int, msgIDs string, bodies []string) (string, []wireReply) {
	t.Helper()
	prefix := nc.NewInbox() + "."
	id := nuid.Next()
	if msgIDs == "" {
		msgIDs = id
	}
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(prefix+"*.>", ch)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	for i, body := range bodies {
		op := bus.FastOpAppend
		switch i {
		case 0:
			op = bus.FastOpStart
		case len(bodies) - 1:
			op = bus.FastOpCommit
		}
		m := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
		m.Header.Set(events.HeaderMsgID, fmt.Sprintf("%s-%d", msgIDs, i+1))
		m.Reply = prefix + id + "." + strconv.Itoa(flow) + ".fail." + strconv.Itoa(i+1) + "." + strconv.Itoa(op) + ".$FI"
		require.NoError(t, nc.PublishMsg(m))
	}
	var got []wireReply
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-ch:
			require.True(t, strings.HasPrefix(m.Subject, prefix+id+"."), "reply on %s, outside the batch's prefix", m.Subject)
			r := wireReply{subject: m.Subject, status: m.Header.Get("Status")}
			if len(m.Data) > 0 {
				require.NoError(t, json.Unmarshal(m.Data, &r.body), "reply %q", m.Data)
			}
			got = append(got, r)
			if r.status == "503" || r.final() {
				return id, got
			}
		case <-deadline:
			t.Fatalf("no final answer to the batch within 5s; replies so far: %+v", got)
		}
	}
}

func bodies(n int) []string {
	b := make([]string, n)
	for i := range b {
		b[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	return b
}

// number reads a JSON number of a reply.
func number(t *testing.T, r wireReply, key string) int {
	t.Helper()
	v, ok := r.body[key].(float64)
	require.True(t, ok, "reply %v has no number %q", r.body, key)
	return int(v)
}

// storedCount is how many messages a stream holds.
func storedCount(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

// TestFastBatchConformance pins the wire behaviour of nats-server's fast
// batches that fastPublisher and Conn.Publish rely on, against the server
// release the module pins: a batch is answered by one PubAck carrying its
// ID and how many messages it handled; every other reply is a flow message
// with a "type"; an error ends the batch with a count of what was stored
// before it (or, on the first message, with a plain publish's error); a
// stream without allow_batched refuses with JSBatchPublishDisabledErr; a
// subject no stream takes gets a 503.
func TestFastBatchConformance(t *testing.T) {
	require.Equal(t, fastBatchCheckedOn, server.VERSION,
		"fast batches were checked against nats-server %s and this is %s: re-check the protocol "+
			"(reply subject, PubAck count, flow and error replies) in the server's source, then update fastBatchCheckedOn",
		fastBatchCheckedOn, server.VERSION)
	conn := testenv.NATS(t)
	require.Equal(t, fastBatchCheckedOn, conn.NC.ConnectedServerVersion())
	require.True(t, bus.FastBatchServer(conn.NC.ConnectedServerVersion()))
	subject := events.TaskEventSubject("SUCCESS")

	t.Run("one PubAck per batch, with the count", func(t *testing.T) {
		before := storedCount(t, conn.JS, events.StreamEvents)
		id, replies := sendRawBatch(t, conn.NC, subject, bus.FastBatchFlow, "", bodies(7))
		require.Len(t, replies, 2, "the flow settings for the first message, then the PubAck: %+v", replies)
		flow := replies[0]
		require.Equal(t, "ack", flow.body["type"])
		require.Equal(t, 0, number(t, flow, "seq"))
		require.Equal(t, bus.FastBatchFlow, number(t, flow, "msgs"))
		ack := replies[1]
		require.Equal(t, events.StreamEvents, ack.body["stream"])
		require.Equal(t, id, ack.body["batch"])
		require.Equal(t, 7, number(t, ack, "count"))
		require.Nil(t, ack.body["error"])
		require.Equal(t, before+7, storedCount(t, conn.JS, events.StreamEvents))
	})

	t.Run("flow messages carry a type, only the PubAck does not", func(t *testing.T) {
		_, replies := sendRawBatch(t, conn.NC, subject, 2, "", bodies(9))
		require.Greater(t, len(replies), 2, "acknowledgements every 2 messages: %+v", replies)
		for _, r := range replies[:len(replies)-1] {
			require.Equal(t, "ack", r.body["type"], "%+v", r)
		}
		require.Equal(t, 9, number(t, replies[len(replies)-1], "count"))
	})

	t.Run("repeated messages are dropped and counted", func(t *testing.T) {
		_, replies := sendRawBatch(t, conn.NC, subject, bus.FastBatchFlow, "again", bodies(5))
		require.Equal(t, 5, number(t, replies[len(replies)-1], "count"))
		before := storedCount(t, conn.JS, events.StreamEvents)
		b := append(bodies(5), `{"n":5}`, `{"n":6}`)
		_, replies = sendRawBatch(t, conn.NC, subject, bus.FastBatchFlow, "again", b)
		ack := replies[len(replies)-1]
		require.Nil(t, ack.body["error"], "%+v", replies)
		require.Equal(t, 7, number(t, ack, "count"), "%+v", replies)
		require.Equal(t, before+2, storedCount(t, conn.JS, events.StreamEvents), "the two new messages only")
	})

	t.Run("a refused message ends the batch with an error", func(t *testing.T) {
		reconfigure(t, conn, events.StreamEvents, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 })
		defer reconfigure(t, conn, events.StreamEvents, func(c *jetstream.StreamConfig) { c.MaxMsgSize = -1 })
		for _, refused := range []int{3, 0} { // mid-batch, then the first message
			b := bodies(6)
			b[refused] = strings.Repeat("x", 2048)
			before := storedCount(t, conn.JS, events.StreamEvents)
			_, replies := sendRawBatch(t, conn.NC, subject, bus.FastBatchFlow, "", b)
			last := replies[len(replies)-1]
			require.True(t, strings.Contains(last.subject, fmt.Sprintf(".fail.%d.", refused+1)),
				"answered on the refused message's reply subject: %+v", replies)
			apiErr, ok := last.body["error"].(map[string]any)
			require.True(t, ok, "the batch ends with an error answer: %+v", replies)
			require.Equal(t, 10054, int(apiErr["err_code"].(float64)), "JSStreamMessageExceedsMaximumErr")
			require.Nil(t, last.body["count"], "no count: the client sends the whole batch again")
			// A plain publish behind the batch on the same connection is
			// handled after every message of it.
			_, err := conn.JS.Publish(context.Background(), subject, []byte("{}"))
			require.NoError(t, err)
			require.Equal(t, before+uint64(refused)+1, storedCount(t, conn.JS, events.StreamEvents),
				"the messages before the refused one are stored, none after it")
		}
	})

	t.Run("a stream without allow_batched refuses", func(t *testing.T) {
		reconfigure(t, conn, events.StreamEvents, func(c *jetstream.StreamConfig) { c.AllowBatchPublish = false })
		defer reconfigure(t, conn, events.StreamEvents, func(c *jetstream.StreamConfig) { c.AllowBatchPublish = true })
		before := storedCount(t, conn.JS, events.StreamEvents)
		_, replies := sendRawBatch(t, conn.NC, subject, bus.FastBatchFlow, "", bodies(4))
		apiErr, ok := replies[0].body["error"].(map[string]any)
		require.True(t, ok, "%+v", replies)
		require.Equal(t, bus.ErrCodeBatchDisabled, int(apiErr["err_code"].(float64)))
		require.Equal(t, before, storedCount(t, conn.JS, events.StreamEvents))
	})

	t.Run("a subject no stream takes gets no responders", func(t *testing.T) {
		_, replies := sendRawBatch(t, conn.NC, "ax.nowhere", bus.FastBatchFlow, "", bodies(3))
		require.Equal(t, "503", replies[0].status)
	})
}
