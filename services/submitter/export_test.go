package submitter

import "github.com/axsched/ax/services/internal/dispatch"

// Coalescing reports whether Run is serving single submissions in shared
// transactions yet.
func (s *Submitter) Coalescing() bool { return s.coalescing.Load() }

// DropDirect makes the submitter drop every group of direct dispatches
// for which drop says so, instead of sending it: the window of a process
// killed between a commit and its dispatch. Call it after DispatchWith.
func (s *Submitter) DropDirect(drop func(taskIDs []int64) bool) {
	s.direct.fault = func(tasks []dispatch.Task) bool {
		ids := make([]int64, len(tasks))
		for i, t := range tasks {
			ids[i] = t.Dispatch.TaskID
		}
		return drop(ids)
	}
}
