package manifest

import (
	"regexp"
	"testing"
)

var (
	labelPattern     = regexp.MustCompile(`^` + dns1123Label + `$`)
	subdomainPattern = regexp.MustCompile(`^` + dns1123Subdomain + `$`)
	kindPatternRE    = regexp.MustCompile(`^` + kindPattern + `$`)
)

var names = []string{"", "a", "A", "0", "-", ".", "a-b", "a--b", "-a", "a-", "a.b", "a..b", ".a", "a.", "a.-b",
	"apps", "bench.example.dev", "v1", "v1beta1", "V1", "a_b", "é", "ConfigMap", "Probe", "configMap", "C3PO", "Ab-c",
	"example.com", "x.y-z.0", "a b", "a\x00", "Z"}

func TestNamesAsTheirPatterns(t *testing.T) {
	for _, s := range names {
		checkNames(t, s)
	}
}

func FuzzNames(f *testing.F) {
	for _, s := range names {
		f.Add(s)
	}
	f.Fuzz(checkNames)
}

func checkNames(t *testing.T, s string) {
	if got, want := isLabel(s), labelPattern.MatchString(s); got != want {
		t.Errorf("isLabel(%q) = %v, the pattern says %v", s, got, want)
	}
	if got, want := isSubdomain(s), subdomainPattern.MatchString(s); got != want {
		t.Errorf("isSubdomain(%q) = %v, the pattern says %v", s, got, want)
	}
	if got, want := isKind(s), kindPatternRE.MatchString(s); got != want {
		t.Errorf("isKind(%q) = %v, the pattern says %v", s, got, want)
	}
}
