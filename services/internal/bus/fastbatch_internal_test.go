package bus

import "testing"

func TestFastBatchServer(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"2.15.2", true},
		{"2.14.0", true},
		{"2.14.0-beta.1", true},
		{"3.0.0", true},
		{"2.13.9", false},
		{"2.10.24", false},
		{"2.9.10", false},
		{"", false}, // not connected
		{"garbage", false},
	} {
		if got := fastBatchServer(c.version); got != c.want {
			t.Errorf("fastBatchServer(%q) = %v, want %v", c.version, got, c.want)
		}
	}
}

func TestStreamOf(t *testing.T) {
	for subject, want := range map[string]string{
		"ax.events.task.ready.now": "AX_EVENTS",
		"ax.work.due":              "AX_WORK",
		"ax.bench.done":            "",
		"ax.eventsx":               "",
	} {
		if got := streamOf(subject); got != want {
			t.Errorf("streamOf(%q) = %q, want %q", subject, got, want)
		}
	}
}
