package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/contracts"
)

func newTypeCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{Use: "type", Short: "List and configure task types through the API, and size their worker pools"}
	f.register(cmd)
	print := f.print
	printOne := func(cmd *cobra.Command, t *contracts.TaskType) error {
		return print(cmd.OutOrStdout(), t, func() { printType(cmd.OutOrStdout(), t) })
	}
	update := func(cmd *cobra.Command, name string, u contracts.TaskTypeUpdate) error {
		t, err := f.client().UpdateType(cmd.Context(), name, u)
		if err != nil {
			return err
		}
		return printOne(cmd, t)
	}

	list := &cobra.Command{
		Use: "list", Short: "List registered task types and their settings", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			types, err := f.client().ListTypes(cmd.Context())
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), contracts.TaskTypeList{Types: types}, func() { printTypes(cmd.OutOrStdout(), types) })
		},
	}
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a task type", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := f.client().GetType(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printOne(cmd, t)
		},
	}
	var sf typeSetFlags
	set := &cobra.Command{
		Use: "set NAME", Short: "Change a task type's settings; flags not given keep their value", Args: cobra.ExactArgs(1),
		Example: `  ax type set file.export --timeout 30m --concurrency 4
  ax type set sms.send --priority high --backoff-base 1s --backoff-cap 10m --fail-silently=false`,
		RunE: func(cmd *cobra.Command, args []string) error {
			u := sf.update(cmd.Flags())
			if u.Empty() {
				return errors.New("nothing to change: give at least one of --timeout, --max-retries, --priority, " +
					"--concurrency, --backoff-base, --backoff-cap, --fail-silently")
			}
			return update(cmd, args[0], u)
		},
	}
	sf.register(set.Flags())
	pause := &cobra.Command{
		Use: "pause NAME", Short: "Stop dispatching a task type; its tasks wait READY", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return update(cmd, args[0], contracts.TaskTypeUpdate{Paused: new(true)})
		},
	}
	resume := &cobra.Command{
		Use: "resume NAME", Short: "Dispatch a paused task type again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return update(cmd, args[0], contracts.TaskTypeUpdate{Paused: new(false)})
		},
	}
	cmd.AddCommand(list, get, set, pause, resume, newTypeSizeCmd(print))
	return cmd
}

// typeSetFlags holds the flags of `ax type set`. Only the flags given on the
// command line are sent, so the others keep their stored value.
type typeSetFlags struct {
	timeout, priority, backoffBase, backoffCap string
	maxRetries, concurrency                    int
	failSilently                               bool
}

func (f *typeSetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.timeout, "timeout", "", "run timeout of one attempt, e.g. 30s (at most 24h)")
	fs.IntVar(&f.maxRetries, "max-retries", 0, "retries after a failure, 0..100")
	fs.StringVar(&f.priority, "priority", "", "default priority: high, normal or low")
	fs.IntVar(&f.concurrency, "concurrency", 0, "cluster-wide cap on RUNNING tasks; 0 means unlimited")
	fs.StringVar(&f.backoffBase, "backoff-base", "", "first retry delay, doubled per retry, e.g. 1s")
	fs.StringVar(&f.backoffCap, "backoff-cap", "", "longest retry delay, e.g. 10m (at least --backoff-base)")
	fs.BoolVar(&f.failSilently, "fail-silently", false, "end FAILED without a dead letter or alert (non-core work)")
}

func (f *typeSetFlags) update(fs *pflag.FlagSet) contracts.TaskTypeUpdate {
	var u contracts.TaskTypeUpdate
	if fs.Changed("timeout") {
		u.Timeout = &f.timeout
	}
	if fs.Changed("max-retries") {
		u.MaxRetries = &f.maxRetries
	}
	if fs.Changed("priority") {
		p := contracts.Priority(f.priority)
		u.Priority = &p
	}
	if fs.Changed("concurrency") {
		u.Concurrency = &f.concurrency
	}
	if fs.Changed("backoff-base") {
		u.BackoffBase = &f.backoffBase
	}
	if fs.Changed("backoff-cap") {
		u.BackoffCap = &f.backoffCap
	}
	if fs.Changed("fail-silently") {
		u.FailSilently = &f.failSilently
	}
	return u
}

func newTypeSizeCmd(print func(io.Writer, any, func()) error) *cobra.Command {
	var throughput, peak float64
	var latency time.Duration
	cmd := &cobra.Command{
		Use:   "size",
		Short: "Size a task type's worker pool from target throughput and task latency",
		Long: `Prints the worker-pool sizing rule: workers = ceil(throughput × latency × 1.3),
that is enough workers to sustain the throughput plus 30% headroom, and a
queue of about half of the peak one-second backlog. Nothing is sent to the API.`,
		Example: `  ax type size --throughput 200 --latency 300ms            # 78 workers, queue 100
  ax type size --throughput 200 --latency 300ms --peak 1000  # queue 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("peak") {
				peak = throughput
			}
			s, err := sizePool(throughput, latency, peak)
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), s, func() { printPoolSizing(cmd.OutOrStdout(), s) })
		},
	}
	fs := cmd.Flags()
	fs.Float64Var(&throughput, "throughput", 0, "target tasks per second (required)")
	fs.DurationVar(&latency, "latency", 0, "time one task takes to run, e.g. 300ms (required)")
	fs.Float64Var(&peak, "peak", 0, "tasks arriving in the busiest second (default: --throughput)")
	return cmd
}

// poolHeadroom is the spare capacity ax's sizing rule adds on top of
// throughput × latency, as an exact fraction: 1.3 in float64 would make
// 200/s × 300ms come out as 78.00000000000001 and round up to 79.
var poolHeadroom = big.NewRat(13, 10)

// poolSizing is the worker pool ax's sizing rule recommends for one task type.
type poolSizing struct {
	Throughput float64 `json:"throughput_per_second"`
	Latency    string  `json:"latency"`
	Headroom   float64 `json:"headroom_factor"`
	// Workers = ceil(Throughput × Latency × Headroom).
	Workers int `json:"workers"`
	// PeakBacklog is what arrives in the busiest second; Queue is about half
	// of it, so a burst waits briefly instead of being handed back.
	PeakBacklog float64 `json:"peak_backlog"`
	Queue       int     `json:"queue"`
}

// sizePool applies ax's pool-sizing rule: workers = ceil(throughput × latency × 1.3) and
// queue = ceil(peak backlog of one second / 2). throughput and peak are
// tasks per second.
func sizePool(throughput float64, latency time.Duration, peak float64) (poolSizing, error) {
	if !(throughput > 0) || math.IsInf(throughput, 0) {
		return poolSizing{}, fmt.Errorf("--throughput must be > 0 tasks per second, got %v", throughput)
	}
	if latency <= 0 {
		return poolSizing{}, fmt.Errorf("--latency must be > 0, e.g. 300ms, got %s", latency)
	}
	if !(peak > 0) || math.IsInf(peak, 0) {
		return poolSizing{}, fmt.Errorf("--peak must be > 0 tasks per second, got %v", peak)
	}
	work := new(big.Rat).SetFloat64(throughput)
	work.Mul(work, big.NewRat(int64(latency), int64(time.Second)))
	work.Mul(work, poolHeadroom)
	workers, ok := ceilInt(work)
	if !ok {
		return poolSizing{}, fmt.Errorf("--throughput %v × --latency %s needs more workers than a pool can hold", throughput, latency)
	}
	queue, ok := ceilInt(new(big.Rat).Quo(new(big.Rat).SetFloat64(peak), big.NewRat(2, 1)))
	if !ok {
		return poolSizing{}, fmt.Errorf("--peak %v is too large", peak)
	}
	h, _ := poolHeadroom.Float64()
	return poolSizing{Throughput: throughput, Latency: latency.String(), Headroom: h, Workers: workers,
		PeakBacklog: peak, Queue: queue}, nil
}

// ceilInt rounds a positive rational up; ok is false when it overflows int.
func ceilInt(r *big.Rat) (int, bool) {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > math.MaxInt32 {
		return 0, false
	}
	return int(q.Int64()), true
}

func printPoolSizing(w io.Writer, s poolSizing) {
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workers\t= ceil(throughput × latency × %s)\t= ceil(%s/s × %s × %s)\t= %d\n",
		num(s.Headroom), num(s.Throughput), s.Latency, num(s.Headroom), s.Workers)
	fmt.Fprintf(tw, "queue\t≈ ceil(peak one-second backlog ÷ 2)\t= ceil(%s ÷ 2)\t= %d\n", num(s.PeakBacklog), s.Queue)
	tw.Flush()
}

func printType(w io.Writer, t *contracts.TaskType) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("name", t.Name)
	row("timeout", t.Timeout)
	row("max_retries", strconv.Itoa(t.MaxRetries))
	row("priority", string(t.Priority))
	row("concurrency", concurrencyText(t.Concurrency))
	row("backoff", t.BackoffBase+" .. "+t.BackoffCap)
	row("fail_silently", strconv.FormatBool(t.FailSilently))
	row("paused", strconv.FormatBool(t.Paused))
	row("updated_at", t.UpdatedAt.Format(time.RFC3339Nano))
	tw.Flush()
}

func printTypes(w io.Writer, types []contracts.TaskType) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIMEOUT\tRETRIES\tPRIORITY\tCONCURRENCY\tBACKOFF\tFAIL_SILENTLY\tPAUSED\tUPDATED")
	for _, t := range types {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%t\t%t\t%s\n", t.Name, t.Timeout, t.MaxRetries, t.Priority,
			concurrencyText(t.Concurrency), t.BackoffBase+".."+t.BackoffCap, t.FailSilently, t.Paused,
			t.UpdatedAt.Format(time.RFC3339))
	}
	tw.Flush()
}

func concurrencyText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}
