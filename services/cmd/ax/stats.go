package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
)

func newStatsCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count tasks per type and state, and show each lane's backlog",
		Long: `Count tasks per type and state, and show each priority lane's backlog (due
READY and RETRYING tasks) with the age of its oldest. The submitter reads the
unfinished states and lanes at most every 5 seconds, and the finished states,
which take a scan of the whole table, at most once a minute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.client().Stats(cmd.Context())
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), s, func() { printStats(cmd.OutOrStdout(), s) })
		},
	}
	f.register(cmd)
	return cmd
}

func printStats(w io.Writer, s *contracts.Stats) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "TYPE\t")
	for _, st := range contracts.Statuses {
		fmt.Fprintf(tw, "%s\t", st)
	}
	fmt.Fprintln(tw)
	for _, t := range s.Types {
		fmt.Fprintf(tw, "%s\t", t.Type)
		for _, st := range contracts.Statuses {
			fmt.Fprintf(tw, "%d\t", t.Counts[st])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANE\tBACKLOG\tOLDEST DUE")
	for _, l := range s.Lanes {
		age := "-"
		if l.OldestDue != nil {
			age = s.At.Sub(*l.OldestDue).Round(time.Millisecond).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", l.Priority, l.Backlog, age)
	}
	tw.Flush()
	if len(s.Types) == 0 && !slices.ContainsFunc(s.Lanes, func(l contracts.LaneStats) bool { return l.Backlog > 0 }) {
		fmt.Fprintln(w, "no tasks")
	}
	if len(s.Workflows) > 0 {
		var parts []string
		for _, st := range contracts.WorkflowStatuses {
			if n := s.Workflows[st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", st, n))
			}
		}
		fmt.Fprintf(w, "workflows: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "unfinished states and lanes read at %s, finished states at %s\n",
		s.At.Format(time.RFC3339), s.FinishedAt.Format(time.RFC3339))
}
