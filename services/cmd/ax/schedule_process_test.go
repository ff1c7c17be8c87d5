package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

type fire struct{ at, firedAt, task int64 }

// fires lists a schedule's recorded fires, oldest first.
func (c *cluster) fires(t *testing.T, schedule string) []fire {
	t.Helper()
	rows, err := c.db.Query(`SELECT fire_time, fired_at, COALESCE(task_id, 0) FROM schedule_fires
		WHERE schedule_name = ? ORDER BY fire_time`, schedule)
	require.NoError(t, err)
	defer rows.Close()
	var out []fire
	for rows.Next() {
		var f fire
		require.NoError(t, rows.Scan(&f.at, &f.firedAt, &f.task))
		out = append(out, f)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestSchedulesAcrossKilledTimers runs three timer processes under
// schedules that fire every second and kills them with SIGKILL: while any
// timer runs, every fire time is fired exactly once and none early; after
// all were killed for eight seconds and one restarted, each catch-up
// policy decides what happens to the fire times nobody fired (those more
// than the 2 s grace late).
func TestSchedulesAcrossKilledTimers(t *testing.T) {
	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	timerFlags := func(id int) []string {
		return []string{"--node-id", strconv.Itoa(id), "--schedule-grace", "2s"}
	}
	timers := []*proc{
		c.service(t, "timer", "timer-1", timerFlags(1)...),
		c.service(t, "timer", "timer-2", timerFlags(2)...),
		c.service(t, "timer", "timer-3", timerFlags(3)...),
	}
	ctx := context.Background()
	// The type an executor would register; no executor runs, so the
	// fired tasks wait READY.
	_, err := c.db.Exec(`INSERT INTO task_types (name) VALUES ('ax.noop')`)
	require.NoError(t, err)
	for _, name := range []string{"soak", "catch-up-skip", "catch-up-last", "catch-up-all"} {
		req := contracts.ScheduleRequest{Name: name, Cron: "* * * * * *", Task: contracts.TaskTemplate{Type: "ax.noop"}}
		req.CatchUp = "all" // a fire a loaded machine finds late is still fired
		if name != "soak" {
			req.CatchUp = name[len("catch-up-"):]
		}
		_, err := c.api.CreateSchedule(ctx, req)
		require.NoError(t, err)
	}

	// One replica killed, another started, a third killed: the others go on.
	time.Sleep(4 * time.Second)
	timers[1].kill9(t)
	time.Sleep(3 * time.Second)
	timers = append(timers, c.service(t, "timer", "timer-4", timerFlags(4)...))
	time.Sleep(3 * time.Second)
	timers[2].kill9(t)
	time.Sleep(3 * time.Second)

	// All gone for eight seconds, then one back.
	timers[0].kill9(t)
	timers[3].kill9(t)
	down := c.fires(t, "catch-up-all")
	time.Sleep(8 * time.Second)
	c.service(t, "timer", "timer-5", timerFlags(5)...)
	time.Sleep(4 * time.Second)

	soak := c.fires(t, "soak")
	require.Greater(t, len(soak), 10)
	last := down[len(down)-1].at
	for i, f := range soak {
		require.GreaterOrEqual(t, f.firedAt, f.at, "fire time %d fired early", f.at)
		require.NotZero(t, f.task)
		if i > 0 && f.at <= last {
			require.Equal(t, soak[i-1].at+1000, f.at, "every fire time once while a timer ran")
		}
	}
	var tasks int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&tasks))
	var fired int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM schedule_fires`).Scan(&fired))
	require.Equal(t, fired, tasks, "one task per fire")

	after := func(name string) []fire {
		var out []fire
		for _, f := range c.fires(t, name) {
			if f.at > last {
				out = append(out, f)
			}
		}
		require.NotEmpty(t, out, name)
		return out
	}
	contiguous := func(name string, fs []fire) {
		for i := 1; i < len(fs); i++ {
			require.Equal(t, fs[i-1].at+1000, fs[i].at, "%s: fire times after the first catch-up", name)
		}
	}
	all := after("catch-up-all")
	require.Equal(t, last+1000, all[0].at, "all: the first missed fire time is fired")
	contiguous("all", all)
	require.Greater(t, all[0].firedAt-all[0].at, int64(3000), "all: fired late, after the restart")

	lastFires := after("catch-up-last")
	require.Greater(t, lastFires[0].at-last, int64(3000), "last: the earlier missed fire times are not fired")
	require.Less(t, lastFires[0].firedAt-lastFires[0].at, int64(1500), "last: the latest missed fire time is fired")
	contiguous("last", lastFires)

	skip := after("catch-up-skip")
	require.Greater(t, skip[0].at-last, int64(3000), "skip: missed fire times are not fired")
	require.Less(t, skip[0].firedAt-skip[0].at, int64(2500), "skip: only a fire time within the grace is fired")
	contiguous("skip", skip)
	testenv.Eventually(t, 10*time.Second, "schedule state readable", func() bool {
		sc, err := c.api.GetSchedule(ctx, "catch-up-all")
		return err == nil && sc.LastFireTime != nil
	})
}
