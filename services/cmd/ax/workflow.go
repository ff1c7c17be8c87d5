package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts"
)

func newWorkflowCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{Use: "workflow", Short: "Submit, inspect and cancel workflows (DAGs of tasks) through the API"}
	f.register(cmd)
	// show prints the workflow an API call answered, or returns its error.
	show := func(cmd *cobra.Command) func(*contracts.Workflow, error) error {
		return func(wf *contracts.Workflow, err error) error {
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), wf, func() { printWorkflow(cmd.OutOrStdout(), wf) })
		}
	}
	var file string
	submit := &cobra.Command{
		Use: "submit", Short: "Submit a workflow from a JSON file (the body of POST /v1/workflows)", Args: cobra.NoArgs,
		Example: `  ax workflow submit -f order.json
  echo '{"name":"order","steps":[{"key":"charge","type":"ax.noop"},{"key":"sms","type":"ax.noop","depends_on":["charge"]}]}' | ax workflow submit -f -`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read workflow: %w", err)
			}
			var req contracts.WorkflowRequest
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return fmt.Errorf("workflow %s is not a workflow request: %w", file, err)
			}
			return show(cmd)(f.client().CreateWorkflow(cmd.Context(), req))
		},
	}
	submit.Flags().StringVarP(&file, "file", "f", "", "JSON file holding the workflow, - for stdin (required)")
	_ = submit.MarkFlagRequired("file")
	get := &cobra.Command{
		Use: "get ID", Short: "Show a workflow and its steps", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd)(f.client().GetWorkflow(cmd.Context(), args[0]))
		},
	}
	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a workflow and every step that has not ended", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd)(f.client().CancelWorkflow(cmd.Context(), args[0]))
		},
	}
	cmd.AddCommand(submit, get, cancel, newWorkflowListCmd(&f))
	return cmd
}

// printWorkflowHead prints a workflow's first line, without its end.
func printWorkflowHead(w io.Writer, id, name, bizKey, status, reason string) {
	fmt.Fprintf(w, "workflow %s %q", id, name)
	if bizKey != "" {
		fmt.Fprintf(w, " biz_key=%s", bizKey)
	}
	fmt.Fprintf(w, ": %s", status)
	if reason != "" {
		fmt.Fprintf(w, " (%s)", reason)
	}
}

func printWorkflow(w io.Writer, wf *contracts.Workflow) {
	printWorkflowHead(w, wf.ID, wf.Name, wf.BizKey, string(wf.Status), wf.Reason)
	if wf.Deduplicated {
		fmt.Fprint(w, " [deduplicated: an existing workflow with this name and biz_key]")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTASK\tTYPE\tSTATUS\tDEPENDS ON\tCOMPENSATION")
	for _, st := range wf.Steps {
		deps := "-"
		if len(st.DependsOn) > 0 {
			deps = strings.Join(st.DependsOn, ",")
			if st.When != "" && st.When != string(contracts.WhenSuccess) {
				deps += " (" + st.When + ")"
			}
		}
		comp := "-"
		if st.CompensationTaskID != "" {
			comp = st.CompensationTaskID + " " + string(st.CompensationStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Key, st.TaskID, st.Type, st.Status, deps, comp)
	}
	tw.Flush()
}

func newLineageCmd() *cobra.Command {
	var f apiFlags
	var bizKey, taskType string
	cmd := &cobra.Command{
		Use:   "lineage [TASK-ID]",
		Short: "Show the whole chain around a task or a business key as a tree",
		Long: `Shows the workflow, parents, children and compensations of a task, or of
every workflow and task holding a business key, with every attempt's node,
times and outcome, each task's last reason and last error.`,
		Example: `  ax lineage 2007029096248250368
  ax lineage --biz-key order-42`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && bizKey == "":
				l, err := f.client().TaskLineage(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), l, func() { printLineage(cmd.OutOrStdout(), l) })
			case len(args) == 0 && bizKey != "":
				ls, err := f.client().BizKeyLineage(cmd.Context(), bizKey, taskType)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), ls, func() {
					if len(ls.Lineages) == 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "no workflow or task has biz_key %s\n", bizKey)
					}
					for i := range ls.Lineages {
						if i > 0 {
							fmt.Fprintln(cmd.OutOrStdout())
						}
						printLineage(cmd.OutOrStdout(), &ls.Lineages[i])
					}
				})
			default:
				return fmt.Errorf("give a task ID or --biz-key, not both and not neither")
			}
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&bizKey, "biz-key", "", "business key of the workflows and tasks to show")
	cmd.Flags().StringVar(&taskType, "type", "", "with --biz-key: only tasks of this type")
	return cmd
}

// printLineage draws a lineage as a tree: the workflow, then each task
// under its parents (a task with several parents is drawn in full under
// the first and referred to under the others), each with its attempts,
// its last transfer's reason and its last error; compensations last.
func printLineage(w io.Writer, l *contracts.Lineage) {
	if wf := l.Workflow; wf != nil {
		printWorkflowHead(w, wf.ID, wf.Name, wf.BizKey, string(wf.Status), wf.Reason)
		fmt.Fprintln(w)
	}
	byID := map[string]*contracts.LineageTask{}
	children := map[string][]contracts.LineageEdge{}
	hasParent := map[string]bool{}
	for i := range l.Tasks {
		byID[l.Tasks[i].ID] = &l.Tasks[i]
	}
	for _, e := range l.Edges {
		children[e.Parent] = append(children[e.Parent], e)
		hasParent[e.Child] = true
	}
	p := &treePrinter{w: w, byID: byID, children: children, drawn: map[string]bool{}}
	var roots, comps []string
	for _, t := range l.Tasks {
		switch {
		case hasParent[t.ID]:
		case t.Compensates != "":
			comps = append(comps, t.ID)
		default:
			roots = append(roots, t.ID)
		}
	}
	p.list(roots, nil, "")
	if len(comps) > 0 {
		fmt.Fprintln(w, "compensations:")
		p.list(comps, nil, "")
	}
}

type treePrinter struct {
	w        io.Writer
	byID     map[string]*contracts.LineageTask
	children map[string][]contracts.LineageEdge
	drawn    map[string]bool
}

// list draws ids as siblings; whens[i], when given, is the condition of
// ids[i] on the parent they are drawn under.
func (p *treePrinter) list(ids, whens []string, indent string) {
	for i, id := range ids {
		branch, more := "├─ ", "│  "
		if i == len(ids)-1 {
			branch, more = "└─ ", "   "
		}
		when := ""
		if whens != nil {
			when = whens[i]
		}
		p.node(id, indent+branch, indent+more, when)
	}
}

func (p *treePrinter) node(id, head, indent, when string) {
	t, ok := p.byID[id]
	if !ok {
		fmt.Fprintf(p.w, "%stask %s (not in this answer)\n", head, id)
		return
	}
	name := t.StepKey
	if t.Compensates != "" {
		name = "undo " + t.Compensates
	}
	if name == "" {
		name = t.Type
	}
	cond := ""
	if when != "" && when != string(contracts.WhenSuccess) {
		cond = " [when " + when + "]"
	}
	if p.drawn[id] {
		fmt.Fprintf(p.w, "%s%s (task %s, %s, shown above)%s\n", head, name, id, t.Status, cond)
		return
	}
	p.drawn[id] = true
	fmt.Fprintf(p.w, "%s%s  task %s  %s  %s%s\n", head, name, id, t.Type, t.Status, cond)
	for _, a := range t.Attempts {
		fmt.Fprintf(p.w, "%s  attempt %d on %s  %s", indent, a.Attempt, a.Node, clockTime(a.StartedAt))
		if a.EndedAt != nil {
			fmt.Fprintf(p.w, " -> %s (%s)  %s", clockTime(*a.EndedAt), a.EndedAt.Sub(a.StartedAt).Round(time.Millisecond), a.Outcome)
		} else {
			fmt.Fprint(p.w, " -> still running")
		}
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, "%s  %s at %s: %s\n", indent, t.Status, clockTime(t.At), t.Reason)
	if t.LastError != "" {
		fmt.Fprintf(p.w, "%s  last error: %s\n", indent, strings.TrimSpace(t.LastError))
	}
	var kids []string
	var whens []string
	for _, e := range p.children[id] {
		kids = append(kids, e.Child)
		whens = append(whens, string(e.When))
	}
	p.list(kids, whens, indent)
}

func clockTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }
