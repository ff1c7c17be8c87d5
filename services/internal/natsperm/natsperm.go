// Package natsperm is the NATS side of least privilege: the subjects each
// ax service publishes and subscribes to, JetStream's API included, and
// the nats-server configuration that grants each service's user exactly
// those (`ax nats-config`).
//
// Every ax process runs the history relay and the dispatch sender besides
// its service, so every user publishes events (ax.events.>), work for the
// executors (ax.work.exec.>) and the relay's wake-ups, and may declare the
// two streams. What differs is the rest: only the timer, the reaper and
// the executor (handing work back) publish due commands; only the timer
// reads the event stream's consumers; only the dispatcher pulls due
// commands; only executors and the reaper pull executor work; the
// submitter consumes nothing.
package natsperm

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// Permissions are the subjects one user may publish and subscribe to.
type Permissions struct {
	Publish []string
	// PublishDeny carves out of Publish's wildcards (deny wins in NATS).
	PublishDeny []string
	Subscribe   []string
}

// Services are the services with a user each, in the order they are
// written; "up" is the one-process `ax up`, which runs all five.
var Services = []string{"submitter", "timer", "dispatcher", "executor", "reaper", "up"}

// User is the NATS user name of a service.
func User(service string) string { return "ax-" + service }

// InboxPrefix is where a user's request replies and pulled messages
// arrive. A prefix per user keeps one service from reading another's
// replies (the default _INBOX.> would be shared by all).
func InboxPrefix(user string) string { return "_INBOX." + user }

// PasswordVar is the environment variable of nats-server that holds a
// service user's password in the generated configuration.
func PasswordVar(service string) string {
	return "AX_NATS_PASSWORD_" + strings.ToUpper(service)
}

const jsAPI = "$JS.API."

// consumerRights are the JetStream API subjects to declare, look up and
// pull from the durable consumer name (a token, or * for any) of stream,
// and to acknowledge its messages. create narrows creation to consumers
// filtering on that subject (nats.go puts the filter in the subject).
func consumerRights(stream, name, filter string) []string {
	return []string{
		jsAPI + "CONSUMER.CREATE." + stream + "." + name + "." + filter,
		jsAPI + "CONSUMER.INFO." + stream + "." + name,
		jsAPI + "CONSUMER.MSG.NEXT." + stream + "." + name,
		"$JS.ACK." + stream + "." + name + ".>",
	}
}

// For returns the permissions of service's user (one of Services).
func For(service string) (Permissions, error) {
	user := User(service)
	p := Permissions{
		Publish: []string{
			events.EventsSubjects, events.ExecAll, events.SubjectRelayWake,
			jsAPI + "INFO",
		},
		Subscribe: []string{InboxPrefix(user) + ".>", events.SubjectRelayWake},
	}
	for _, stream := range []string{events.StreamEvents, events.StreamWork} {
		for _, op := range []string{"INFO", "CREATE", "UPDATE"} {
			p.Publish = append(p.Publish, jsAPI+"STREAM."+op+"."+stream)
		}
	}
	p.Publish = append(p.Publish, jsAPI+"CONSUMER.DELETE."+events.StreamEvents+"."+events.ObsoleteConsumerDispatcherReady)
	own := Services[:len(Services)-1]
	switch {
	case service == "up":
	case slices.Contains(own, service):
		own = []string{service}
	default:
		return Permissions{}, fmt.Errorf("unknown service %q: want one of %s", service, strings.Join(Services, ", "))
	}
	for _, s := range own {
		pub, sub := serviceRights(s)
		p.Publish = append(p.Publish, pub...)
		p.Subscribe = append(p.Subscribe, sub...)
	}
	if service == "executor" || service == "reaper" {
		// Their rights on executor consumers are by wildcard, which would
		// also reach the dispatcher's consumer of due commands.
		d := events.ConsumerDispatcher
		p.PublishDeny = []string{
			jsAPI + "CONSUMER.*." + events.StreamWork + "." + d + ".>",
			jsAPI + "CONSUMER.*." + events.StreamWork + "." + d,
			jsAPI + "CONSUMER.MSG.NEXT." + events.StreamWork + "." + d,
			"$JS.ACK." + events.StreamWork + "." + d + ".>",
		}
	}
	p.Publish = dedupe(p.Publish)
	p.Subscribe = dedupe(p.Subscribe)
	return p, nil
}

// serviceRights are what service does beyond what every process does.
func serviceRights(service string) (publish, subscribe []string) {
	switch service {
	case "timer":
		publish = append(publish, events.SubjectDue)
		for _, c := range []struct{ name, subject string }{
			{events.ConsumerTimer, events.TaskEventSubject(contracts.StatusReady)},
			{events.ConsumerTimerRetrying, events.TaskEventSubject(contracts.StatusRetrying)},
			{events.ConsumerTimerTypes, events.SubjectTypeChanged},
		} {
			publish = append(publish, consumerRights(events.StreamEvents, c.name, c.subject)...)
		}
	case "dispatcher":
		publish = consumerRights(events.StreamWork, events.ConsumerDispatcher, events.SubjectDue)
	case "executor":
		// Due commands: work handed back at shutdown.
		publish = append(execConsumerRights(), events.SubjectDue, events.SubjectBenchDone)
		// Doorbells (core NATS on the work subjects) and cancellations.
		subscribe = []string{events.ExecAll, events.TaskEventSubject(contracts.StatusCancelled)}
	case "reaper":
		// Due commands: stranded work moved on.
		publish = append(execConsumerRights(), events.SubjectDue)
	}
	return publish, subscribe
}

// execConsumerRights let executors and the reaper declare, pull from and
// delete the consumers of executor work (names cannot be narrowed by
// prefix in a subject pattern; creation is narrowed by its filter).
func execConsumerRights() []string {
	return append(consumerRights(events.StreamWork, "*", events.ExecAll),
		jsAPI+"CONSUMER.DELETE."+events.StreamWork+".*")
}

func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// WriteConfig writes the accounts block of a nats-server configuration:
// account with JetStream, and one user per service with its permissions,
// its password read from nats-server's environment (PasswordVar), so the
// file holds no secret. Include it from the server's main configuration.
func WriteConfig(w io.Writer, account string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ax's NATS users, one per service, each allowed only the subjects its\n")
	fmt.Fprintf(&b, "# service uses (written by `ax nats-config`; docs/security.md).\n")
	fmt.Fprintf(&b, "# Passwords come from nats-server's environment: %s, ...\n", PasswordVar("submitter"))
	fmt.Fprintf(&b, "accounts {\n  %s {\n    jetstream: enabled\n    users: [\n", account)
	for _, s := range Services {
		p, err := For(s)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "      {\n        user: %q\n        password: $%s\n", User(s), PasswordVar(s))
		fmt.Fprintf(&b, "        permissions: {\n")
		if len(p.PublishDeny) > 0 {
			fmt.Fprintf(&b, "          publish: { allow: %s, deny: %s }\n", list(p.Publish), list(p.PublishDeny))
		} else {
			fmt.Fprintf(&b, "          publish: { allow: %s }\n", list(p.Publish))
		}
		fmt.Fprintf(&b, "          subscribe: { allow: %s }\n", list(p.Subscribe))
		fmt.Fprintf(&b, "        }\n      }\n")
	}
	fmt.Fprintf(&b, "    ]\n  }\n}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func list(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
