// Package bench is the `ax bench` harness: ax's four standard workloads
// (throughput, latency, delayed, retry) run through ax's public path —
// the submit API via contracts/client, then timer, dispatcher and executor
// — with figures printed, never asserted. It is a measuring tool, not a
// test that fails on time.
//
// Every workload uses the built-in task type ax.bench, whose handler
// reports every run (events.BenchDone, batched over core NATS) with its own
// start and end times; the harness subscribes before submitting and matches
// reports to the task IDs the API returned. Durability is measured apart,
// by polling MySQL until every task is SUCCESS.
//
// A run either starts its own ax (local mode: a nats-server child, `ax up`
// or the five services as processes, a fresh database and Redis prefix,
// all removed afterwards) or measures a running deployment (remote mode).
// Around each measured window the harness samples CPU time and peak RSS
// of the processes involved from /proc. In local mode it can compare two
// sides, another ax build or other flags (Config.VsAxBin, VsAxFlags): each
// rep of each workload runs on both, in ABBA order, and Compare sets B's
// headline figures against A's rep by rep.
//
// docs/benchmarks.md says exactly how each figure is measured.
package bench
