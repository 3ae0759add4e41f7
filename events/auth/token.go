package auth

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// A controller token lets a controller credential speak to the HTTP and
// Kubernetes APIs, which take bearer tokens, with the key it connects to
// NATS with: "jpc1.NAME.EXPIRY.SIGNATURE", the credential's name, the
// Unix second it expires and the NKey signature of what precedes it.
// The instances check it against the credential's public key in the
// store, so revoking the credential revokes its tokens (decision 0094).
const (
	TokenPrefix = "jpc1."
	// MaxTokenLifetime bounds how far ahead a token may expire: a token
	// that leaks is good for this long at most.
	MaxTokenLifetime = time.Hour
)

// ErrBadToken marks a controller token that is malformed, expired,
// forged, or of a credential that is revoked or not a controller's.
var ErrBadToken = errors.New("controller token refused")

// IsToken reports whether tok has the shape of a controller token.
func IsToken(tok string) bool { return strings.HasPrefix(tok, TokenPrefix) }

// SignToken makes a controller token from a creds file of jetplane creds
// create --role controller, valid for ttl (at most MaxTokenLifetime) from
// now. It returns the token and when it expires.
func SignToken(creds []byte, ttl time.Duration, now time.Time) (string, time.Time, error) {
	role, name := credsHeader(creds)
	if role != RoleController {
		return "", time.Time{}, fmt.Errorf("controller token: the creds file is not a controller credential's (role %q); make one with jetplane creds create --role controller --kinds KIND NAME", role)
	}
	if ttl < time.Second || ttl > MaxTokenLifetime {
		return "", time.Time{}, fmt.Errorf("controller token: lifetime %s: give one from 1s to %s", ttl, MaxTokenLifetime)
	}
	kp, err := nkeys.ParseDecoratedNKey(creds)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("controller token: %w", err)
	}
	exp := now.Add(ttl).Truncate(time.Second)
	body := TokenPrefix + name + "." + strconv.FormatInt(exp.Unix(), 10)
	sig, err := kp.Sign(tokenSigned(body))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("controller token: %w", err)
	}
	return body + "." + base64.RawURLEncoding.EncodeToString(sig), exp, nil
}

// tokenSigned is what a token's signature covers: its body behind a
// context no NATS server nonce can start with (a nonce is printable
// text, and the same key signs nonces to connect). Without it, a server
// the controller connects to could send a token's body as its nonce and
// keep the signature as a working token.
func tokenSigned(body string) []byte {
	return append([]byte("\xffjetplane controller token\x00"), body...)
}

// VerifyToken checks a controller token at now and returns the live
// controller credential that signed it. Any refusal wraps ErrBadToken.
func (s *Store) VerifyToken(tok string, now time.Time) (Cred, error) {
	rest, ok := strings.CutPrefix(tok, TokenPrefix)
	if !ok {
		return Cred{}, fmt.Errorf("%w: not a controller token", ErrBadToken)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return Cred{}, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	name := parts[0]
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Cred{}, fmt.Errorf("%w: malformed expiry", ErrBadToken)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return Cred{}, fmt.Errorf("%w: malformed signature", ErrBadToken)
	}
	at := time.Unix(exp, 0)
	if !now.Before(at) {
		return Cred{}, fmt.Errorf("%w: expired at %s; make a new one with jetplane creds token", ErrBadToken, at.UTC().Format(time.RFC3339))
	}
	// A minute of clock skew between the signer and this instance.
	if at.After(now.Add(MaxTokenLifetime + time.Minute)) {
		return Cred{}, fmt.Errorf("%w: expires more than %s ahead", ErrBadToken, MaxTokenLifetime)
	}
	u, err := s.current()
	if err != nil {
		return Cred{}, err
	}
	for _, c := range u.Users {
		if c.Name != name || c.Revoked != nil || c.Role != RoleController {
			continue
		}
		pub, err := nkeys.FromPublicKey(c.Key)
		if err != nil {
			return Cred{}, fmt.Errorf("%w: %v", ErrBadToken, err)
		}
		if err := pub.Verify(tokenSigned(TokenPrefix+name+"."+parts[1]), sig); err != nil {
			// The same answer as for no such credential: a caller
			// without one learns nothing of which names exist.
			return Cred{}, fmt.Errorf("%w: no live controller credential %q signed it", ErrBadToken, name)
		}
		c.Kinds = slices.Clone(c.Kinds) // the cached file's is shared
		return c, nil
	}
	return Cred{}, fmt.Errorf("%w: no live controller credential %q signed it", ErrBadToken, name)
}

// credsHeader reads the role and name from a creds file's first comment
// ("# jetplane NATS credential: role ROLE, name NAME").
func credsHeader(creds []byte) (Role, string) {
	sc := bufio.NewScanner(bytes.NewReader(creds))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# jetplane NATS credential: role ")
		if !ok {
			continue
		}
		role, name, _ := strings.Cut(rest, ", name ")
		return Role(role), strings.TrimSpace(name)
	}
	return "", ""
}
