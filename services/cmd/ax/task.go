package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

func newTaskCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{Use: "task", Short: "Submit, inspect and cancel tasks through the API"}
	f.register(cmd)
	print := f.print

	var req contracts.SubmitRequest
	var payload string
	var maxRetries int
	submit := &cobra.Command{
		Use: "submit", Short: "Submit a task", Args: cobra.NoArgs,
		Example: `  ax task submit --type ax.sleep --payload '{"ms":2000}' --delay 5s`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if payload != "" {
				if !json.Valid([]byte(payload)) {
					return fmt.Errorf("--payload is not valid JSON: %s", payload)
				}
				req.Payload = json.RawMessage(payload)
			}
			if cmd.Flags().Changed("max-retries") {
				req.MaxRetries = &maxRetries
			}
			t, err := f.client().Submit(cmd.Context(), req)
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), t, func() { printTask(cmd.OutOrStdout(), t) })
		},
	}
	fs := submit.Flags()
	fs.StringVar(&req.Type, "type", "", "task type (required)")
	fs.StringVar(&payload, "payload", "", "JSON payload")
	fs.StringVar(&req.Priority, "priority", "", "high, normal or low (default: the type's)")
	fs.StringVar(&req.Delay, "delay", "", "run after this duration, e.g. 5s")
	fs.StringVar(&req.RunAt, "run-at", "", "run at this RFC 3339 time")
	fs.StringVar(&req.BizKey, "biz-key", "", "business key for deduplication")
	fs.IntVar(&maxRetries, "max-retries", 0, "retries (default: the type's)")
	fs.StringVar(&req.Timeout, "timeout", "", "run timeout (default: the type's)")
	fs.StringSliceVar(&req.Parents, "parent", nil, "ID of a task to wait for (repeatable); the task starts SUSPEND")
	fs.StringVar(&req.When, "when", "", "with --parent: run when the parents succeed (default), fail or always end")
	fs.StringVar(&req.TraceParent, "traceparent", envStr("TRACEPARENT", ""), "W3C trace context (00-<trace id>-<span id>-<flags>) the task's spans join, e.g. a CI job's or a script's trace [TRACEPARENT]")
	_ = submit.MarkFlagRequired("type")

	get := &cobra.Command{
		Use: "get ID", Short: "Show a task", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := f.client().Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), t, func() { printTask(cmd.OutOrStdout(), t) })
		},
	}
	history := &cobra.Command{
		Use: "history ID", Short: "Show every state transfer of a task", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := f.client().History(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), h, func() {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "AT\tFROM\tTO\tATTEMPT\tACTOR\tREASON")
				for _, e := range h.History {
					from := string(e.From)
					if from == "" {
						from = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.At.Format(time.RFC3339Nano), from, e.To, e.Attempt, e.Actor, e.Reason)
				}
				tw.Flush()
			})
		},
	}
	var (
		cancelFilter client.TaskFilter
		cancelBulk   bulkFlags
		note         string
	)
	cancel := &cobra.Command{
		Use:   "cancel [ID]",
		Short: "Cancel a task that has not finished, or every task a filter matches",
		Long: `Cancel one task by ID, or every task a filter matches. A filter needs --status,
a state that can be cancelled (READY, RUNNING, SUSPEND, RETRYING). With a
filter the matches are counted first (a dry run, nothing changes); --yes then
cancels exactly those that were counted, never tasks that appeared since.`,
		Example: `  ax task cancel 2007029096248250368
  ax task cancel --type sms.send --status READY            # count only
  ax task cancel --type sms.send --status READY --yes      # count, then cancel`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bulk := cancelFilter != client.TaskFilter{}
			switch {
			case len(args) == 1 && (bulk || cancelBulk.dryRun || cancelBulk.yes):
				return fmt.Errorf("give a task ID or a filter, not both")
			case len(args) == 0 && !bulk:
				return fmt.Errorf("give a task ID, or a filter (--status and more) to cancel in bulk")
			case bulk:
				return runBulk(cmd, &f, cancelBulk, f.client().BulkCancel, contracts.BulkFilter(cancelFilter), note, "cancel")
			}
			t, err := f.client().CancelWithNote(cmd.Context(), args[0], note)
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), t, func() { printTask(cmd.OutOrStdout(), t) })
		},
	}
	registerTaskFilter(cancel.Flags(), &cancelFilter)
	cancelBulk.register(cancel.Flags(), "cancel")
	cancel.Flags().StringVar(&note, "actor", envStr("USER", ""), "a note of who cancels, recorded beside the API key, which is the actor of record [USER]")
	cmd.AddCommand(submit, get, history, cancel, newTaskListCmd(&f))
	return cmd
}

func printTask(w io.Writer, t *contracts.Task) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	stamp := func(at time.Time) string {
		if at.IsZero() {
			return ""
		}
		return at.UTC().Format(time.RFC3339Nano)
	}
	row("id", t.ID)
	row("type", t.Type)
	row("status", string(t.Status))
	row("priority", string(t.Priority))
	row("biz_key", t.BizKey)
	row("attempt", fmt.Sprint(t.Attempt))
	row("retries", fmt.Sprintf("%d of %d", t.RetryCount, t.MaxRetries))
	row("timeout", t.Timeout)
	row("created_at", stamp(t.CreatedAt))
	row("next_run_time", stamp(t.NextRunTime))
	row("updated_at", stamp(t.UpdatedAt))
	row("executor", t.Executor)
	if p := t.Progress; p != nil {
		row("progress", fmt.Sprintf("%d%% %s (at %s)", p.Percent, p.Message, stamp(p.At)))
	}
	row("payload", string(t.Payload))
	row("result", string(t.Result))
	row("last_error", strings.TrimSpace(t.LastError))
	if t.Deduplicated {
		row("deduplicated", "true (an existing task with this biz_key)")
	}
	if t.Origin != nil {
		row("origin", "schedule "+t.Origin.Schedule+", fire time "+t.Origin.FireTime.Format(time.RFC3339Nano))
	}
	tw.Flush()
}
