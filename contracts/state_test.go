package contracts

import "testing"

// TestTransitionTable checks every (from, to) pair against a matrix written
// out by hand from the task state diagram (docs/architecture.md), so a change to Transitions must be a deliberate
// change here too.
func TestTransitionTable(t *testing.T) {
	const (
		R = StatusReady
		U = StatusRunning
		S = StatusSuccess
		F = StatusFailed
		T = StatusTimeout
		C = StatusCancelled
		P = StatusSuspend
		Y = StatusRetrying
		N = StatusNone
	)
	allowed := map[[2]Status]bool{
		{N, R}: true, {N, P}: true,
		{R, U}: true, {R, C}: true, {R, Y}: true,
		{U, S}: true, {U, F}: true, {U, T}: true, {U, C}: true, {U, R}: true,
		{F, Y}: true,
		{T, Y}: true,
		{Y, R}: true, {Y, C}: true,
		{P, R}: true, {P, C}: true,
	}
	froms := append([]Status{N}, Statuses...)
	tos := append([]Status{N}, Statuses...)
	checked := 0
	for _, from := range froms {
		for _, to := range tos {
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				want := allowed[[2]Status{from, to}]
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%q, %q) = %v, want %v", from, to, got, want)
				}
			})
			checked++
		}
	}
	if checked != 81 {
		t.Fatalf("checked %d pairs, want 81", checked)
	}
}

func TestTerminalStates(t *testing.T) {
	tests := []struct {
		s    Status
		want bool
	}{
		{StatusSuccess, true}, {StatusCancelled, true},
		{StatusReady, false}, {StatusRunning, false}, {StatusFailed, false},
		{StatusTimeout, false}, {StatusSuspend, false}, {StatusRetrying, false},
		{StatusNone, false}, {Status("BOGUS"), false},
	}
	for _, tc := range tests {
		if got := tc.s.Terminal(); got != tc.want {
			t.Errorf("%q.Terminal() = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestParseStatusAndPriority(t *testing.T) {
	for _, s := range Statuses {
		if got, err := ParseStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseStatus("ready"); err == nil {
		t.Error("ParseStatus accepted lowercase")
	}
	tests := []struct {
		in      string
		want    Priority
		wantErr bool
	}{
		{"", "", false}, {"high", PriorityHigh, false}, {"normal", PriorityNormal, false},
		{"low", PriorityLow, false}, {"urgent", "", true}, {"HIGH", "", true},
	}
	for _, tc := range tests {
		got, err := ParsePriority(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePriority(%q) = %q, %v", tc.in, got, err)
		}
	}
	for i, p := range Priorities {
		if p.Rank() != i || PriorityFromRank(i) != p {
			t.Errorf("rank of %s", p)
		}
	}
}

func TestValidateTypeName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"ax.noop", true}, {"sms", true}, {"billing.refund-callback", true}, {"a1.b2.c3", true},
		{"", false}, {"Ax.noop", false}, {"ax..noop", false}, {".ax", false}, {"ax.", false},
		{"ax_noop", false}, {"ax noop", false}, {"ax.*", false}, {"ax.>", false},
		{string(make([]byte, 129)), false},
	}
	for _, tc := range tests {
		if err := ValidateTypeName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateTypeName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
