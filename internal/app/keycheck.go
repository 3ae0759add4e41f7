package app

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/chain"
	"github.com/jetplane/jetplane/events/integrity"
)

// sealedUnder reads, from the stopped store's files, the data keys of
// sealed Secrets: for each key-encryption key id that wrapped one, one
// data key (id and stored entry) to try the key file on, and how many.
func sealedUnder(dataDir string) (map[string]dataKeySample, error) {
	store, err := integrity.OpenStore(dataDir, "KV_"+events.KeysBucket)
	if err != nil || store == nil {
		return nil, err
	}
	blocks, err := store.Blocks()
	if err != nil {
		return nil, err
	}
	latest := map[string][]byte{}
	subjPrefix := "$KV." + events.KeysBucket + "."
	for _, b := range blocks {
		buf, err := os.ReadFile(b.Path)
		if err != nil {
			return nil, err
		}
		_, _, err = store.Records(b, buf, 0, func(e chain.Event, _ int64) error {
			id, ok := strings.CutPrefix(string(e.Subject), subjPrefix)
			if !ok {
				return nil
			}
			if len(e.Data) == 0 {
				delete(latest, id) // a delete or purge marker: the key was destroyed
				return nil
			}
			latest[id] = append([]byte(nil), e.Data...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := map[string]dataKeySample{}
	for id, v := range latest {
		kek, _, ok := strings.Cut(string(v), ":")
		if !ok {
			continue
		}
		s := out[kek]
		if s.count == 0 {
			s.id, s.entry = id, v
		}
		s.count++
		out[kek] = s
	}
	return out, nil
}

type dataKeySample struct {
	id    string
	entry []byte
	count int
}

// checkKeyFile stops the start when the log holds sealed Secrets and the
// key file at path is missing, lacks a key they were sealed under, or
// holds another key under the same id: a new key would leave every such
// Secret unreadable for good. It never makes a key (see sealer).
func checkKeyFile(path string, needed map[string]dataKeySample) error {
	if len(needed) == 0 {
		return nil
	}
	ids := make([]string, 0, len(needed))
	total := 0
	for id, s := range needed {
		ids = append(ids, id)
		total += s.count
	}
	slices.Sort(ids)
	what := fmt.Sprintf("the log holds Secrets sealed under key ids %s (%d data keys)", strings.Join(ids, ", "), total)
	fix := "restore the key file from a backup (jetplane keys rotate makes a new key for new Secrets only; it cannot open these)"
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("encryption key file %s is missing, and %s; %s", path, what, fix)
	}
	kf, err := seal.LoadKeyFile(path)
	if err != nil {
		return err
	}
	var missing, wrong []string
	for _, id := range ids {
		if !kf.Has(id) {
			missing = append(missing, id)
			continue
		}
		if err := kf.Unwraps(needed[id].id, needed[id].entry); err != nil {
			wrong = append(wrong, id)
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Errorf("encryption key file %s lacks key ids %s, and %s; %s", path, strings.Join(missing, ", "), what, fix)
	case len(wrong) > 0:
		return fmt.Errorf("encryption key file %s holds other keys under ids %s than those the log's Secrets were sealed under; %s; %s", path, strings.Join(wrong, ", "), what, fix)
	}
	return nil
}
