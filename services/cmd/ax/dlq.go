package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

func newDLQCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{Use: "dlq", Short: "List and re-run dead letters (tasks that failed for good)"}
	f.register(cmd)

	var filter client.DeadLetterFilter
	list := &cobra.Command{
		Use: "list", Short: "List dead letters, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := f.client().ListDeadLetters(cmd.Context(), filter)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), l, func() {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTASK\tTYPE\tSTATUS\tATTEMPT\tCREATED\tRETRIED BY\tLAST ERROR")
				for _, d := range l.DeadLetters {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.TaskID, d.Type, d.Status, d.Attempt,
						d.CreatedAt.Format(time.RFC3339), d.RetriedBy, firstLine(d.LastError, 80))
				}
				tw.Flush()
				if l.NextBefore != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "more: --before %s\n", l.NextBefore)
				}
			})
		},
	}
	list.Flags().BoolVar(&filter.All, "all", false, "include letters already re-run")
	list.Flags().StringVar(&filter.Type, "type", "", "only this task type")
	list.Flags().StringVar(&filter.Before, "before", "", "only letters older than this id (paging)")
	list.Flags().IntVar(&filter.Limit, "limit", 100, "at most this many (1..1000)")

	var (
		actor       string
		retryFilter contracts.BulkFilter
		retryBulk   bulkFlags
	)
	retry := &cobra.Command{
		Use:   "retry [ID]",
		Short: "Re-run a dead letter's task, or every open dead letter a filter matches; the history records who",
		Long: `Re-run the task of one dead letter, given the dead letter's ID or the task's
ID (as ax task get and ax task list show it), or of every open dead letter a
filter matches (--type, --created-after, --created-before: when the letter
was filed). With a filter the letters are counted first (nothing changes);
--yes then re-runs exactly those that were counted.`,
		Example: `  ax dlq retry 42                          # dead letter 42
  ax dlq retry 2007029096248250368         # the open dead letter of this task
  ax dlq retry --type sms.send --yes       # every open letter of sms.send`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bulk := retryFilter != contracts.BulkFilter{}
			switch {
			case len(args) == 1 && (bulk || retryBulk.dryRun || retryBulk.yes):
				return fmt.Errorf("give an ID or a filter, not both")
			case len(args) == 0 && !bulk:
				return fmt.Errorf("give a dead letter or task ID, or a filter (--type, --created-after, --created-before)")
			case bulk:
				return runBulk(cmd, &f, retryBulk, f.client().BulkRetryDeadLetters, retryFilter, actor, "re-run")
			}
			id, err := deadLetterID(cmd.Context(), f.client(), args[0])
			if err != nil {
				return err
			}
			d, err := f.client().RetryDeadLetter(cmd.Context(), id, actor)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), d, func() {
				fmt.Fprintf(cmd.OutOrStdout(), "task %s re-queued by %s (dead letter %s)\n", d.TaskID, d.RetriedBy, d.ID)
			})
		},
	}
	retry.Flags().StringVar(&actor, "actor", envStr("USER", ""), "a note of who re-runs it, recorded beside the API key, which is the actor of record [USER]")
	retry.Flags().StringVar(&retryFilter.Type, "type", "", "every open letter of this task type")
	retry.Flags().StringVar(&retryFilter.CreatedAfter, "created-after", "", "every open letter filed at or after this RFC 3339 time")
	retry.Flags().StringVar(&retryFilter.CreatedBefore, "created-before", "", "every open letter filed before this RFC 3339 time")
	retryBulk.register(retry.Flags(), "re-run")
	cmd.AddCommand(list, retry)
	return cmd
}

// deadLetterID turns what a person typed into a dead letter ID: the ID of
// the task's open dead letter when arg is a task that has one, else arg
// itself. Task IDs are snowflakes and letter IDs small counters, so the two
// do not meet in practice; the task is looked up first because people copy
// task IDs from lists and alerts.
func deadLetterID(ctx context.Context, c *client.Client, arg string) (string, error) {
	if _, err := strconv.ParseInt(arg, 10, 64); err != nil {
		return "", fmt.Errorf("%q is not a dead letter or task ID (a positive integer)", arg)
	}
	l, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{TaskID: arg, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(l.DeadLetters) == 1 {
		return l.DeadLetters[0].ID, nil
	}
	return arg, nil
}

// firstLine shortens an error to its first line, at most n bytes.
func firstLine(s string, n int) string {
	for i, c := range s {
		if c == '\n' {
			s = s[:i]
			break
		}
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
