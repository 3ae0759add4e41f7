package security

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
)

func secretYAML(name, password string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: shop}\ntype: Opaque\nstringData: {password: " + password + "}\ndata: {token: " + base64.StdEncoding.EncodeToString([]byte(password+"-token")) + "}\n"
}

// rawLog returns every stored message of the log, as bytes.
func rawLog(t *testing.T, a *app.App) [][]byte {
	t.Helper()
	nc, _ := connectWith(t, a.NATSURL(), a.Creds().InstanceCreds())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	last, err := a.Log().LastSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := uint64(1); seq <= last; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Data)
	}
	return out
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func field(t *testing.T, raw []byte, f, k string) string {
	t.Helper()
	o, err := api.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetSpec().GetFields()[f].GetStructValue().GetFields()[k].GetStringValue()
}

// A Secret's value is nowhere in the log's bytes, nor anywhere in the data
// directory; output masks it unless a token that may see it asks.
func TestSecretValueNeverInTheLog(t *testing.T) {
	dir := t.TempDir()
	ps := append(principals(), api.Principal{Token: "secret-reader-token", Name: "ops", Role: api.RoleReader, ShowSecrets: true})
	a := start(t, app.Config{DataDir: dir, Principals: ps})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	password := "pw-" + nuid.Next()
	if _, err := admin.Apply(context.Background(), "s.yaml", []byte(secretYAML("db", password)), ""); err != nil {
		t.Fatal(err)
	}
	k := api.Key{Kind: "Secret", Namespace: "shop", Name: "db"}

	for i, ev := range rawLog(t, a) {
		if bytes.Contains(ev, []byte(password)) {
			t.Fatalf("event %d holds the secret in clear", i+1)
		}
	}
	if hits := filesContaining(t, dir, password); len(hits) > 0 {
		t.Fatalf("the data directory holds the secret in clear in %q", hits)
	}

	raw, err := admin.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if got := field(t, raw, "stringData", "password"); got != seal.Masked {
		t.Fatalf("get shows %q, want it masked", got)
	}
	h, err := admin.History(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(h.Events[0], []byte(password)) || !bytes.Contains(h.Events[0], []byte(seal.Masked)) {
		t.Fatalf("history shows %s, want it masked", h.Events[0])
	}
	for _, tok := range []string{"admin-token", "secret-reader-token"} {
		c := &api.Client{BaseURL: a.URL(), Token: tok, ShowSecrets: true}
		raw, err := c.Get(context.Background(), k)
		if err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		if got := field(t, raw, "stringData", "password"); got != password {
			t.Fatalf("%s with showSecrets sees %q, want the value", tok, got)
		}
		h, err := c.History(context.Background(), k)
		if err != nil || !bytes.Contains(h.Events[0], []byte(password)) {
			t.Fatalf("%s: history with showSecrets: %v", tok, err)
		}
	}
	for _, tok := range []string{"reader-token", "writer-token"} {
		if code := call(t, a, tok, "GET", "/v1/object?kind=Secret&namespace=shop&name=db&showSecrets=true", ""); code != http.StatusForbidden {
			t.Fatalf("%s asking for secret values: %d, want 403", tok, code)
		}
	}

	// Applying the same Secret again writes nothing: its values are
	// compared in clear, not by their (randomised) ciphertext.
	before := fingerprintOf(t, a)
	if _, err := admin.Apply(context.Background(), "s.yaml", []byte(secretYAML("db", password)), ""); err != nil {
		t.Fatal(err)
	}
	unchanged(t, a, before)
}

// After `keys rotate`, new values are sealed under the new key and the
// old ones stay readable.
func TestSecretKeyRotation(t *testing.T) {
	dir := t.TempDir()
	a := start(t, app.Config{DataDir: dir, Principals: principals()})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token", ShowSecrets: true}
	ctx := context.Background()
	if _, err := admin.Apply(ctx, "s.yaml", []byte(secretYAML("db", "first")), ""); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "auth", "encryption.keys")
	kf, err := seal.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	newID, err := seal.RotateKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Apply(ctx, "s.yaml", []byte(secretYAML("db", "second")), ""); err != nil {
		t.Fatal(err)
	}
	evs := rawLog(t, a)
	var oldKey, newKey int
	for _, ev := range evs {
		oldKey += bytes.Count(ev, []byte("jp:sealed:v1:"+kf.Primary+":"))
		newKey += bytes.Count(ev, []byte("jp:sealed:v1:"+newID+":"))
	}
	if oldKey != 2 || newKey != 2 {
		t.Fatalf("values sealed under the old key: %d, under the new: %d; want 2 and 2", oldKey, newKey)
	}
	h, err := admin.History(ctx, api.Key{Kind: "Secret", Namespace: "shop", Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2 || !bytes.Contains(h.Events[0], []byte(`"first"`)) || !bytes.Contains(h.Events[1], []byte(`"second"`)) {
		t.Fatalf("history after rotation: %s", h.Events)
	}
}

// Crypto-shredding: after delete --purge-secret-data the history keeps
// its events but no value can be read again.
func TestSecretCryptoShredding(t *testing.T) {
	dir := t.TempDir()
	a, stop := run(t, app.Config{DataDir: dir, Principals: principals()})
	t.Cleanup(stop)
	ctx := context.Background()
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token", ShowSecrets: true}
	for _, pw := range []string{"leaked", "rotated"} {
		if _, err := admin.Apply(ctx, "s.yaml", []byte(secretYAML("db", pw)), ""); err != nil {
			t.Fatal(err)
		}
	}
	k := api.Key{Kind: "Secret", Namespace: "shop", Name: "db"}
	writer := &api.Client{BaseURL: a.URL(), Token: "writer-token", PurgeSecretData: true}
	var apiErr *api.APIError
	if _, err := writer.Delete(ctx, k); !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden {
		t.Fatalf("writer purging secret data: %v, want 403", err)
	}
	before := fingerprintOf(t, a)
	purger := &api.Client{BaseURL: a.URL(), Token: "admin-token", PurgeSecretData: true}
	if _, err := purger.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	h, err := admin.History(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) < 3 {
		t.Fatalf("history has %d events, want the two applies and the delete", len(h.Events))
	}
	for i, ev := range h.Events[:2] {
		if bytes.Contains(ev, []byte("leaked")) || bytes.Contains(ev, []byte("rotated")) || !bytes.Contains(ev, []byte(seal.Destroyed)) {
			t.Fatalf("event %d after shredding: %s", i+1, ev)
		}
	}
	after := fingerprintOf(t, a)
	if after.LastSeq <= before.LastSeq {
		t.Fatalf("the delete wrote nothing: %+v", after)
	}
	// The data keys are gone from the key bucket, not only from memory.
	nc, _ := connectWith(t, a.NATSURL(), a.Creds().InstanceCreds())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+events.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // erased
		}
		if len(m.Data) > 0 {
			t.Fatalf("key bucket still holds %s: %q", m.Subject, m.Data)
		}
	}
	// A restarted jetplane (no cache) cannot read them either.
	stop()
	a = start(t, app.Config{DataDir: dir, Principals: principals()})
	admin = &api.Client{BaseURL: a.URL(), Token: "admin-token", ShowSecrets: true}
	h, err = admin.History(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range h.Events[:2] {
		if !bytes.Contains(ev, []byte(seal.Destroyed)) {
			t.Fatalf("event %d after a restart: %s", i+1, ev)
		}
	}
}
