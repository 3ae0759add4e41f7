package podspec

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// An image ref is NAME:TAG or NAME@sha256:DIGEST, where NAME is one or
// two path components (`app`, `team/app`) of lower-case letters and
// digits joined by single '.', '_' or '-', and TAG is 1 to 128 letters,
// digits, '_', '.' or '-', not starting with '.' or '-' (the OCI
// distribution grammar, without a registry host: jetplane runs images
// from its own store only). So no ref holds "..", a NUL, a space or a
// leading '/'.
var (
	nameComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE           = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseImageRef splits NAME:TAG or NAME@sha256:<hex>, checking each part;
// exactly one of tag and digest is set. The error names the ref and the
// rule it breaks.
func ParseImageRef(ref string) (name, tag, digest string, err error) {
	if len(ref) > 512 {
		return "", "", "", fmt.Errorf("image %.40q...: longer than 512 bytes", ref)
	}
	if n, d, ok := strings.Cut(ref, "@"); ok {
		if !validDigest(d) {
			return "", "", "", fmt.Errorf("image %q: the digest must be sha256: and 64 hex digits", ref)
		}
		return n, "", d, checkImageName(n, ref)
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 {
		return "", "", "", fmt.Errorf("image %q: give NAME:TAG or NAME@sha256:DIGEST", ref)
	}
	name, tag = ref[:i], ref[i+1:]
	if !tagRE.MatchString(tag) {
		return "", "", "", fmt.Errorf("image %q: the tag must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", ref)
	}
	return name, tag, "", checkImageName(name, ref)
}

func checkImageName(name, ref string) error {
	parts := strings.Split(name, "/")
	if len(name) > 255 || len(parts) > 2 {
		return fmt.Errorf("image %q: the name must be NAME or REPO/NAME, at most 255 characters", ref)
	}
	for _, p := range parts {
		if !nameComponentRE.MatchString(p) {
			return fmt.Errorf("image %q: %q must be lower-case letters and digits, joined by single '.', '_' or '-'", ref, p)
		}
	}
	return nil
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
