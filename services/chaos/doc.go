// Package chaos is ax's own fault suite, run by `make chaos` (never by
// `make test`: it takes about twenty minutes). Each scenario starts private
// servers on free ports — a MariaDB with its own data directory, a Redis, a
// nats-server — and the five services as separate `ax` processes (two
// executors), drives a steady mixed load of webhook tasks (one submission
// in five a workflow of two, the second depending on the first) whose
// every call the suite records, injects one fault, and then checks every
// acknowledged task against MySQL's history and the record of calls:
//
//   - lost: an acknowledged task missing, or not SUCCESS when the run ends;
//   - early: a handler call that began before the task's due time (for a
//     workflow's second step, its parent's first successful answer);
//   - unexplained duplicates: a call for an attempt no READY→RUNNING
//     transfer in the history granted, or a second call of one attempt
//     that the history does not record (a refused fused claim, or a claim
//     that took the attempt's lease over from its dead or frozen holder);
//   - worst start delay: the longest wait from due time to the start of the
//     call that succeeded, which is how long recovery took.
//
// The machine's shared MariaDB, Redis and NATS are never touched. The suite
// needs bin/ax and bin/nats-server (AX_TEST_BIN_DIR) and mariadb-install-db.
// AX_CHAOS=1 turns it on; AX_CHAOS_REPORT names a file the figures are
// written to as a Markdown table (docs/operations.md quotes them).
package chaos
