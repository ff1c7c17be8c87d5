package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
)

func newRolloutCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Gray-release a new executor version of a task type: a share of its tasks by percent, guarded",
		Long: `A rollout sends a share of a task type's new tasks to the executors that
report one version (--version-label), in steps, while a guard compares that
canary with the other (stable) executors and rolls it back at once when its
p99, failure rate or timeout rate is worse than allowed. See docs/rollout.md.`,
	}
	f.register(cmd)
	show := func(cmd *cobra.Command, ro *contracts.Rollout) error {
		return f.print(cmd.OutOrStdout(), ro, func() { printRollout(cmd.OutOrStdout(), ro) })
	}

	var req contracts.RolloutRequest
	var p99, fail, tout float64
	start := &cobra.Command{
		Use: "start TYPE --version V", Short: "Start a rollout of version V at its first step", Args: cobra.ExactArgs(1),
		Example: `  ax rollout start sms.send --version v2
  ax rollout start sms.send --version v2 --steps 5,25,100 --step-time 30m --window 10m --min-samples 400`,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			if fs.Changed("max-p99-worse") {
				req.Guard.MaxP99Worse = &p99
			}
			if fs.Changed("max-failure-diff") {
				req.Guard.MaxFailureDiff = &fail
			}
			if fs.Changed("max-timeout-diff") {
				req.Guard.MaxTimeoutDiff = &tout
			}
			ro, err := f.client().StartRollout(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			for _, w := range ro.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return show(cmd, ro)
		},
	}
	fs := start.Flags()
	fs.StringVar(&req.Version, "version", "", "the canary's version label, as its executors report it (required)")
	fs.IntSliceVar(&req.Steps, "steps", nil, "percents to walk through, increasing (default 5,10,30,50,100)")
	fs.StringVar(&req.StepTime, "step-time", "", "how long the guard must hold before the next step (default 10m)")
	fs.StringVar(&req.Grace, "grace", "", "how long a task waits for an absent version before falling back (default 30s)")
	fs.StringVar(&req.Guard.Window, "window", "", "how far back the guard compares runs (default 5m)")
	fs.IntVar(&req.Guard.MinSamples, "min-samples", 0, "runs each side needs in the window before the guard judges (default 100)")
	fs.Float64Var(&p99, "max-p99-worse", 0.10, "how much slower the canary's p99 may be, as a fraction of the stable one")
	fs.Float64Var(&fail, "max-failure-diff", 0.02, "how far the canary's failure rate may exceed the stable one (fraction)")
	fs.Float64Var(&tout, "max-timeout-diff", 0.02, "how far the canary's timeout rate may exceed the stable one (fraction)")
	_ = start.MarkFlagRequired("version")

	status := &cobra.Command{
		Use: "status TYPE", Short: "Show a rollout: both versions side by side, the verdict, the log", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ro, err := f.client().GetRollout(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return show(cmd, ro)
		},
	}
	var reason string
	move := func(action, short string) *cobra.Command {
		c := &cobra.Command{
			Use: action + " TYPE", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ro, err := f.client().MoveRollout(cmd.Context(), args[0], action, reason)
				if err != nil {
					return err
				}
				return show(cmd, ro)
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why, for the rollout log")
		return c
	}
	cmd.AddCommand(start, status,
		move("promote", "Go to the next step now without waiting for the guard (after the last: done, 100 %)"),
		move("pause", "Hold the rollout at its percent; the guard stops moving it"),
		move("resume", "Let the guard move a paused rollout again"),
		move("rollback", "Send no new task to the canary (0 %); tasks that ran on it keep it"))
	return cmd
}

func printRollout(w io.Writer, ro *contracts.Rollout) {
	if ro.State == contracts.RolloutNone {
		fmt.Fprintf(w, "%s: no rollout; its tasks go to every executor that serves it\n", ro.Type)
		return
	}
	steps := make([]string, len(ro.Steps))
	for i, s := range ro.Steps {
		steps[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(w, "%s -> %s: %s at %d%% (step %d of %s, %s each since %s)\n", ro.Type, ro.Version, ro.State, ro.Percent,
		ro.Step, strings.Join(steps, ","), ro.StepTime, ro.StepStartedAt.Format("15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "SIDE\tVERSION\tRUNS\tFAILURES\tTIMEOUTS\tP50\tP99\n")
	for _, s := range []struct {
		side string
		v    contracts.VersionStats
	}{{"canary", ro.Canary}, {"stable", ro.Stable}} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f%%\t%.2f%%\t%dms\t%dms\n", s.side, s.v.Version, s.v.Runs,
			s.v.FailureRate*100, s.v.TimeoutRate*100, s.v.P50Ms, s.v.P99Ms)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "guard (window %s, %d runs a side): %s: %s\n", ro.Guard.Window, ro.Guard.MinSamples, ro.Verdict.Verdict, ro.Verdict.Reason)
	for _, l := range ro.Log {
		fmt.Fprintf(w, "  %s %-8s %3d%% -> %3d%%  %s (%s)\n", l.At.Format("15:04:05"), l.Action, l.FromPercent, l.ToPercent, l.Reason, l.Actor)
	}
}
