package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/contracts"
)

func newScheduleCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{Use: "schedule", Short: "Create and manage schedules: tasks submitted at the fire times of a cron expression"}
	f.register(cmd)
	printOne := func(cmd *cobra.Command, sc *contracts.Schedule) error {
		return f.print(cmd.OutOrStdout(), sc, func() { printSchedule(cmd.OutOrStdout(), sc) })
	}
	var cf scheduleFlags
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a schedule", Args: cobra.ExactArgs(1),
		Example: `  ax schedule create nightly.report --cron "30 2 * * *" --tz Europe/Berlin --type report.build --payload '{"kind":"daily"}'
  ax schedule create heartbeat --cron "*/10 * * * * *" --type ax.noop --overlap skip --catch-up last`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := contracts.ScheduleRequest{Name: args[0]}
			if err := cf.apply(cmd.Flags(), &req); err != nil {
				return err
			}
			sc, err := f.client().CreateSchedule(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printOne(cmd, sc)
		},
	}
	cf.register(create.Flags())
	var uf scheduleFlags
	update := &cobra.Command{
		Use: "update NAME", Short: "Change a schedule; flags not given keep their value", Args: cobra.ExactArgs(1),
		Example: `  ax schedule update nightly.report --cron "0 3 * * *"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cur, err := f.client().GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			req := contracts.ScheduleRequest{Cron: cur.Cron, TimeZone: cur.TimeZone, Task: cur.Task, Overlap: cur.Overlap,
				CatchUp: cur.CatchUp, CatchUpLimit: cur.CatchUpLimit, Paused: cur.Paused}
			if err := uf.apply(cmd.Flags(), &req); err != nil {
				return err
			}
			sc, err := f.client().UpdateSchedule(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return printOne(cmd, sc)
		},
	}
	uf.register(update.Flags())
	var after string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List schedules in name order", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := f.client().ListSchedules(cmd.Context(), after, limit)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), l, func() { printSchedules(cmd.OutOrStdout(), l) })
		},
	}
	list.Flags().StringVar(&after, "after", "", "start after this name (the previous page's next)")
	list.Flags().IntVar(&limit, "limit", 0, "page size, 1..1000 (default 100)")
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a schedule, its next fire time and its latest fire", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := f.client().GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printOne(cmd, sc)
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a schedule (the tasks it fired keep naming it)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.client().DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s deleted\n", args[0])
			return nil
		},
	}
	pauser := func(use, short string, paused bool) *cobra.Command {
		return &cobra.Command{Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				sc, err := f.client().PauseSchedule(cmd.Context(), args[0], paused)
				if err != nil {
					return err
				}
				return printOne(cmd, sc)
			}}
	}
	cmd.AddCommand(create, list, get, update, del,
		pauser("pause", "Stop firing a schedule", true),
		pauser("resume", "Fire a schedule again, from its next fire time after now (paused ones are not caught up)", false))
	return cmd
}

// scheduleFlags are the flags of `ax schedule create` and `update`; update
// applies only those given to the stored schedule.
type scheduleFlags struct {
	cron, tz, typ, payload, priority, timeout, overlap, catchUp string
	maxRetries, catchUpLimit                                    int
	paused                                                      bool
}

func (f *scheduleFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cron, "cron", "", `cron expression: 5 fields, 6 with leading seconds, or @hourly, @every 30s, ...`)
	fs.StringVar(&f.tz, "tz", "", "IANA time zone the expression is read in (default UTC), e.g. Europe/Berlin")
	fs.StringVar(&f.typ, "type", "", "task type each fire submits")
	fs.StringVar(&f.payload, "payload", "", "JSON payload of each fire's task")
	fs.StringVar(&f.priority, "priority", "", "high, normal or low (default: the type's)")
	fs.IntVar(&f.maxRetries, "max-retries", 0, "retries of each fire's task (default: the type's)")
	fs.StringVar(&f.timeout, "timeout", "", "run timeout of each fire's task (default: the type's)")
	fs.StringVar(&f.overlap, "overlap", "", "allow (default), or skip while the previous fire's task is not final")
	fs.StringVar(&f.catchUp, "catch-up", "", "missed fire times after downtime: skip (default), last or all")
	fs.IntVar(&f.catchUpLimit, "catch-up-limit", 0, "most fire times --catch-up all fires (default 100, at most 1000)")
	fs.BoolVar(&f.paused, "paused", false, "paused (create it paused; update cannot resume: use resume)")
}

// apply sets the fields whose flags were given.
func (f *scheduleFlags) apply(fs *pflag.FlagSet, req *contracts.ScheduleRequest) error {
	set := func(flag string, dst *string, v string) {
		if fs.Changed(flag) {
			*dst = v
		}
	}
	set("cron", &req.Cron, f.cron)
	set("tz", &req.TimeZone, f.tz)
	set("type", &req.Task.Type, f.typ)
	set("priority", &req.Task.Priority, f.priority)
	set("timeout", &req.Task.Timeout, f.timeout)
	set("overlap", &req.Overlap, f.overlap)
	set("catch-up", &req.CatchUp, f.catchUp)
	if fs.Changed("payload") {
		if !json.Valid([]byte(f.payload)) {
			return errors.New("--payload is not valid JSON")
		}
		req.Task.Payload = json.RawMessage(f.payload)
	}
	if fs.Changed("max-retries") {
		req.Task.MaxRetries = &f.maxRetries
	}
	if fs.Changed("catch-up-limit") {
		req.CatchUpLimit = f.catchUpLimit
	}
	if fs.Changed("paused") {
		req.Paused = f.paused
	}
	return nil
}

func printSchedules(w io.Writer, l *contracts.ScheduleList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIME ZONE\tTYPE\tNEXT FIRE\tPAUSED")
	for _, sc := range l.Schedules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\n", sc.Name, sc.Cron, sc.TimeZone, sc.Task.Type,
			sc.NextFireTime.Format(time.RFC3339), sc.Paused)
	}
	tw.Flush()
	if l.Next != "" {
		fmt.Fprintf(w, "more: ax schedule list --after %s\n", l.Next)
	}
}

func printSchedule(w io.Writer, sc *contracts.Schedule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("name", sc.Name)
	row("cron", sc.Cron)
	row("time_zone", sc.TimeZone)
	row("task", sc.Task.Type+" "+string(sc.Task.Payload))
	row("overlap", sc.Overlap)
	row("catch_up", sc.CatchUp+" (limit "+strconv.Itoa(sc.CatchUpLimit)+")")
	row("paused", strconv.FormatBool(sc.Paused))
	loc, err := time.LoadLocation(sc.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	row("next_fire_time", sc.NextFireTime.Format(time.RFC3339)+" ("+sc.NextFireTime.In(loc).Format("2006-01-02 15:04:05 MST")+")")
	if sc.LastFireTime != nil {
		row("last_fire_time", sc.LastFireTime.Format(time.RFC3339)+" task "+sc.LastTaskID)
	}
	tw.Flush()
}
