package contracts

import (
	"regexp"
	"testing"
)

// typeNameSpec is the rule validTypeName implements, as a regexp.
var typeNameSpec = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$`)

// TestValidTypeNameMatchesPattern: the hand-written check accepts exactly
// what the pattern does, on a table of edge cases and on every string of
// up to four characters over an alphabet that holds each class.
func TestValidTypeNameMatchesPattern(t *testing.T) {
	for _, name := range []string{"", "a", "email.send", "a-b.c-d", "a--b", "a..b", "a.-b", "a-.b", "-a", "a-",
		".a", "a.", "A", "a_b", "a b", "é", "9", "0.0-0", "email.send\n"} {
		if want := typeNameSpec.MatchString(name); validTypeName(name) != want {
			t.Errorf("%q: pattern %v, check %v", name, want, !want)
		}
	}
	alphabet := []byte("az09-._A")
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		if want := typeNameSpec.Match(prefix); validTypeName(string(prefix)) != want {
			t.Fatalf("%q: pattern %v, check %v", prefix, want, !want)
		}
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
}

// FuzzValidTypeName compares the check with the pattern on any input.
func FuzzValidTypeName(f *testing.F) {
	f.Add("email.send")
	f.Add("a--b")
	f.Fuzz(func(t *testing.T, name string) {
		if typeNameSpec.MatchString(name) != validTypeName(name) {
			t.Fatalf("%q: pattern %v, check %v", name, typeNameSpec.MatchString(name), validTypeName(name))
		}
	})
}

// BenchmarkValidateTypeName measures the check every submission makes.
func BenchmarkValidateTypeName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if ValidateTypeName("ax.bench") != nil {
			b.Fatal("refused")
		}
	}
}
