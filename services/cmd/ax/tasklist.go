package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

// registerTaskFilter adds the flags of a task filter, shared by the list
// and the bulk operations.
func registerTaskFilter(fs *pflag.FlagSet, f *client.TaskFilter) {
	fs.StringVar(&f.Type, "type", "", "only this task type")
	fs.StringVar(&f.Status, "status", "", "only this state (READY, RUNNING, SUCCESS, ...)")
	fs.StringVar(&f.BizKey, "biz-key", "", "only the task with this business key (needs --type)")
	fs.StringVar(&f.Node, "node", "", "only tasks whose current or last attempt ran on this executor node (needs --status)")
	fs.StringVar(&f.CreatedAfter, "created-after", "", "only tasks created at or after this RFC 3339 time")
	fs.StringVar(&f.CreatedBefore, "created-before", "", "only tasks created before this RFC 3339 time")
}

func newTaskListCmd(f *apiFlags) *cobra.Command {
	var (
		filter   client.TaskFilter
		limit    int
		cursor   string
		schedule string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first, by type, state, business key, node, creation time or schedule",
		Long: `List tasks, newest first, one page at a time. With --status (and no
--created-before) the order is the latest due time first (for finished tasks:
the most recently run first). With --schedule it is the tasks that schedule
fired, latest fire time first. A full page ends with the cursor of the next one.`,
		Example: `  ax task list --type ax.sleep --status RUNNING
  ax task list --schedule nightly.report --limit 10
  ax task list --status DEAD --created-after 2026-01-02T00:00:00Z -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list := func() (*contracts.TaskList, error) { return f.client().ListTasks(cmd.Context(), filter, limit, cursor) }
			if schedule != "" {
				if filter != (client.TaskFilter{}) {
					return fmt.Errorf("--schedule takes no other filter (only --limit and --cursor): a schedule's tasks are read in fire-time order")
				}
				list = func() (*contracts.TaskList, error) {
					return f.client().ListScheduleTasks(cmd.Context(), schedule, limit, cursor)
				}
			}
			l, err := list()
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), l, func() { printTaskList(cmd.OutOrStdout(), l) })
		},
	}
	registerTaskFilter(cmd.Flags(), &filter)
	cmd.Flags().StringVar(&schedule, "schedule", "", "only the tasks this schedule fired, latest fire time first (with no other filter)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many (1..1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after the previous page (its next cursor)")
	return cmd
}

func printTaskList(w io.Writer, l *contracts.TaskList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPT\tCREATED\tNEXT RUN\tEXECUTOR\tLAST ERROR")
	for _, t := range l.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Type, t.Status, t.Attempt,
			t.CreatedAt.UTC().Format(time.RFC3339), t.NextRunTime.UTC().Format(time.RFC3339), t.Executor, firstLine(t.LastError, 60))
	}
	tw.Flush()
	if l.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", l.NextCursor)
	}
}
