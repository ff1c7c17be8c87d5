package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/contracts"
)

// bulkFlags are the switches of a bulk command: count only, or act.
type bulkFlags struct {
	dryRun, yes bool
}

func (b *bulkFlags) register(fs *pflag.FlagSet, verb string) {
	fs.BoolVar(&b.dryRun, "dry-run", false, "only count what the filter matches")
	fs.BoolVar(&b.yes, "yes", false, "count, then "+verb+" what was counted, "+fmt.Sprint(contracts.BulkLimit)+" per call until none is left")
}

// bulkCall is one bulk API call.
type bulkCall func(context.Context, contracts.BulkRequest) (*contracts.BulkResult, error)

// runBulk counts what filter matches (a dry run) and, with --yes, confirms
// with the dry run's token until nothing that was counted remains. Without
// --yes it only says how many match and how to go on.
func runBulk(cmd *cobra.Command, f *apiFlags, b bulkFlags, call bulkCall, filter contracts.BulkFilter, note, verb string) error {
	if b.dryRun && b.yes {
		return fmt.Errorf("--dry-run and --yes exclude each other")
	}
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	dry, err := call(ctx, contracts.BulkRequest{Filter: filter, DryRun: true})
	if err != nil {
		return err
	}
	if !b.yes {
		return f.print(w, dry, func() {
			fmt.Fprintf(w, "%d match; nothing changed", dry.Matched)
			if dry.Matched > 0 {
				fmt.Fprintf(w, " (run again with --yes to %s them)", verb)
			}
			fmt.Fprintln(w)
		})
	}
	total := contracts.BulkResult{Matched: dry.Matched}
	for dry.Matched > 0 {
		res, err := call(ctx, contracts.BulkRequest{Filter: filter, Confirm: dry.Confirm, Note: note})
		if err != nil {
			return err
		}
		total.Done += res.Done
		total.Skipped += res.Skipped
		total.Remaining = res.Remaining
		if res.Remaining == 0 || res.Done+res.Skipped == 0 {
			break
		}
	}
	return f.print(w, total, func() {
		fmt.Fprintf(w, "%d matched, %d done (%s), %d skipped (moved on meanwhile), %d left\n",
			total.Matched, total.Done, verb, total.Skipped, total.Remaining)
	})
}
