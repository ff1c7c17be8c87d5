package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

func newWorkflowListCmd(f *apiFlags) *cobra.Command {
	var (
		filter client.WorkflowFilter
		limit  int
		cursor string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workflows, newest first, by state, name, business key or creation time",
		Long: `List workflows, newest first, one page at a time, without their steps
(ax workflow get ID shows them). A full page ends with the cursor of the next one.`,
		Example: `  ax workflow list --status FAILED
  ax workflow list --name order --created-after 2026-01-02T00:00:00Z
  ax workflow list --biz-key order-42 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := f.client().ListWorkflows(cmd.Context(), filter, limit, cursor)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), l, func() { printWorkflowList(cmd.OutOrStdout(), l) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&filter.Status, "status", "", "only this state (RUNNING, SUCCEEDED, FAILED, COMPENSATING, COMPENSATED, COMPENSATION_FAILED, CANCELLED)")
	fs.StringVar(&filter.Name, "name", "", "only workflows of this name")
	fs.StringVar(&filter.BizKey, "biz-key", "", "only workflows with this business key")
	fs.StringVar(&filter.CreatedAfter, "created-after", "", "only workflows created at or after this RFC 3339 time")
	fs.StringVar(&filter.CreatedBefore, "created-before", "", "only workflows created before this RFC 3339 time")
	fs.IntVar(&limit, "limit", 50, "at most this many (1..1000)")
	fs.StringVar(&cursor, "cursor", "", "start after the previous page (its next cursor)")
	return cmd
}

func printWorkflowList(w io.Writer, l *contracts.WorkflowList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tBIZ KEY\tSTATUS\tOPEN STEPS\tCREATED\tREASON")
	for _, wf := range l.Workflows {
		key := wf.BizKey
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", wf.ID, wf.Name, key, wf.Status, wf.OpenSteps,
			wf.CreatedAt.UTC().Format(time.RFC3339), firstLine(wf.Reason, 70))
	}
	tw.Flush()
	if l.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", l.NextCursor)
	}
}
