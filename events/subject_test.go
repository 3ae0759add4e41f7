package events

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"

	"github.com/jetplane/jetplane/schemas"
)

func TestEscapeToken(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "_"},
		{"web", "web"},
		{"Deployment.apps", "Deployment~2Eapps"},
		{"a.b*c>d e", "a~2Eb~2Ac~3Ed~20e"},
		{"_", "~5F"},
		{"~", "~7E"},
		{"ü", "~C3~BC"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := EscapeToken(tt.in)
			if got != tt.want {
				t.Fatalf("EscapeToken(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := UnescapeToken(got)
			if err != nil || back != tt.in {
				t.Fatalf("UnescapeToken(%q) = %q, %v; want %q", got, back, err, tt.in)
			}
		})
	}
}

// Every string escapes to one valid subject token and back.
func TestEscapeTokenProperty(t *testing.T) {
	prop := func(s string) bool {
		tok := EscapeToken(s)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			return false
		}
		back, err := UnescapeToken(tok)
		return err == nil && back == s
	}
	cfg := &quick.Config{MaxCount: 20000, Rand: nil}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
	// Random bytes, not just valid UTF-8.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if !prop(string(b)) {
			t.Fatalf("round trip failed for %q", b)
		}
	}
}

func TestUnescapeTokenRejects(t *testing.T) {
	for _, tok := range []string{"", "a.b", "~2", "~zz", "~2e", "~41", "a*", "_x"} {
		if _, err := UnescapeToken(tok); !errors.Is(err, ErrBadSubject) {
			t.Errorf("UnescapeToken(%q) error = %v, want ErrBadSubject", tok, err)
		}
	}
}

func TestParseSubject(t *testing.T) {
	k := &schemas.ObjectKey{Kind: "Deployment.apps", Namespace: "", Name: "web.v2"}
	subj := strings.Replace(KeyFilter(k), "*", "7", 1)
	p, got, err := ParseSubject(subj)
	if err != nil || p != 7 || got.Kind != k.Kind || got.Namespace != "" || got.Name != k.Name {
		t.Fatalf("ParseSubject(%q) = %d, %v, %v", subj, p, got, err)
	}
	for _, bad := range []string{"jp.ev.1.a.b", "jp.in.1.a.b.c", "jp.ev.x.a.b.c", "jp.ev.-1.a.b.c"} {
		if _, _, err := ParseSubject(bad); !errors.Is(err, ErrBadSubject) {
			t.Errorf("ParseSubject(%q) error = %v, want ErrBadSubject", bad, err)
		}
	}
}

func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "~", "_", "~2E", "Deployment.apps", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EscapeToken(s)
		if strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" {
			t.Fatalf("EscapeToken(%q) = %q is not a subject token", s, tok)
		}
		back, err := UnescapeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip %q -> %q -> %q, %v", s, tok, back, err)
		}
		// Any token that unescapes must be the canonical escape of its value,
		// so one key never has two subjects.
		if v, err := UnescapeToken(s); err == nil && EscapeToken(v) != s {
			t.Fatalf("UnescapeToken(%q) = %q, but that escapes to %q", s, v, EscapeToken(v))
		}
	})
}
