package manifest

// The DNS-1123 and kind patterns as loops: every object's names,
// namespace, apiVersion and kind are checked on every write, where the
// regular expressions (kept in names_test.go) cost more than the rest of
// the check.

// isLabel reports whether s matches dns1123Label whole.
func isLabel(s string) bool {
	if s == "" || !lowerAlnum(s[0]) || !lowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !lowerAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// isSubdomain reports whether s matches dns1123Subdomain whole: labels
// joined by dots.
func isSubdomain(s string) bool {
	for {
		i := 0
		for i < len(s) && s[i] != '.' {
			i++
		}
		if !isLabel(s[:i]) {
			return false
		}
		if i == len(s) {
			return true
		}
		s = s[i+1:]
	}
}

// isKind reports whether s matches kindPattern whole.
func isKind(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lowerAlnum(c) && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

func lowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
