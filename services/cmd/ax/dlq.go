package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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

	var actor string
	retry := &cobra.Command{
		Use: "retry ID", Short: "Re-run a dead letter's task; the history records who", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := f.client().RetryDeadLetter(cmd.Context(), args[0], actor)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), d, func() {
				fmt.Fprintf(cmd.OutOrStdout(), "task %s re-queued by %s (dead letter %s)\n", d.TaskID, d.RetriedBy, d.ID)
			})
		},
	}
	retry.Flags().StringVar(&actor, "actor", envStr("USER", ""), "a note of who re-runs it, recorded beside the API key, which is the actor of record [USER]")
	cmd.AddCommand(list, retry)
	return cmd
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
