package podspec

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/json"
	"errors"
	"fmt"
)

// A pod's Secret values reach its node sealed for that node alone: the
// node agent keeps an X25519 key in its own directory and publishes the
// public half in its heartbeat (Report.SealKey); the pod reconciler seals
// the values the pod takes from Secrets with HPKE (RFC 9180: DHKEM
// X25519, HKDF-SHA256, AES-256-GCM) into Work.Sealed, bound to the node
// and the pod's incarnation; the agent opens them. So the node-work
// bucket, its disk and its readers hold no Secret value in clear
// (decision 0036).

var (
	sealKEM  = hpke.DHKEM(ecdh.X25519())
	sealKDF  = hpke.HKDFSHA256()
	sealAEAD = hpke.AES256GCM()
)

// SealedEnv is what Work.Sealed holds: container name → env name → value.
type SealedEnv map[string]map[string]string

// sealInfo binds a sealed value to the node and the pod's incarnation:
// one sealed for another pod or node does not open.
func (w *Work) sealInfo(node string) []byte {
	return fmt.Appendf(nil, "jetplane pod env v1\x00%s\x00%s/%s\x00%s", node, w.Namespace, w.Name, w.UID)
}

// Seal puts env into w.Sealed, for node's public key pub (32 bytes of
// X25519).
func (w *Work) Seal(node string, pub []byte, env SealedEnv) error {
	pk, err := sealKEM.NewPublicKey(pub)
	if err != nil {
		return fmt.Errorf("node %s's seal key: %w", node, err)
	}
	plain, err := json.Marshal(env)
	if err != nil {
		return err
	}
	w.Sealed, err = hpke.Seal(pk, sealKDF, sealAEAD, w.sealInfo(node), plain)
	return err
}

// Open fills the env values w.Sealed holds into its containers, with
// node's private key, and clears Sealed.
func (w *Work) Open(node string, key *ecdh.PrivateKey) error {
	if len(w.Sealed) == 0 {
		return nil
	}
	if key == nil {
		return errors.New("the pod's Secret values are sealed and this node has no key to open them")
	}
	sk, err := hpke.NewDHKEMPrivateKey(key)
	if err != nil {
		return err
	}
	plain, err := hpke.Open(sk, sealKDF, sealAEAD, w.sealInfo(node), w.Sealed)
	if err != nil {
		return fmt.Errorf("the pod's Secret values do not open with node %s's key (sealed for another key or pod): %w", node, err)
	}
	var env SealedEnv
	if err := json.Unmarshal(plain, &env); err != nil {
		return fmt.Errorf("the pod's sealed values: %w", err)
	}
	for i := range w.Spec.Containers {
		c := &w.Spec.Containers[i]
		for j := range c.Env {
			if v, ok := env[c.Name][c.Env[j].Name]; ok {
				c.Env[j].Value = v
			}
		}
	}
	w.Sealed = nil
	return nil
}
