package subscription

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jetplane/jetplane/schemas"
)

// Source is the CloudEvents source of every change jetplane hands out.
const Source = "jetplane"

// TypePrefix starts every CloudEvents type: dev.jetplane.applied, ...
const TypePrefix = "dev.jetplane."

// SignatureHeader carries a delivery's signature:
//
//	Jetplane-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>
//
// A sink recomputes the HMAC over the decimal timestamp, a full stop and the
// exact request body, compares in constant time, and refuses timestamps far
// from its own clock to stop replays.
const SignatureHeader = "Jetplane-Signature"

// Data is a change as a delivery's data carries it: the event and the
// object right after it (its last state, for a deletion), with Secret
// values masked.
type Data struct {
	Sequence uint64          `json:"sequence,string"`
	Type     string          `json:"type"`
	Key      Key             `json:"key"`
	Actor    string          `json:"actor,omitempty"`
	Cause    string          `json:"cause,omitempty"`
	Time     time.Time       `json:"time"`
	Object   json.RawMessage `json:"object,omitempty"`
}

// Key names an object.
type Key struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Event is one change in CloudEvents 1.0's structured JSON form.
type Event struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	// Sequence is the event's log sequence (an extension attribute): the
	// place to resume from.
	Sequence string `json:"sequence"`
	Data     Data   `json:"data"`
}

// NewEvent builds the CloudEvent of ev, carrying obj (already masked) as
// the object after it.
func NewEvent(ev *schemas.EventRecord, obj *schemas.Object) (*Event, error) {
	k := ev.GetKey()
	d := Data{
		Sequence: ev.GetSequence(),
		Type:     TypeName(ev.GetType()),
		Key:      Key{Kind: k.GetKind(), Namespace: k.GetNamespace(), Name: k.GetName()},
		Actor:    ev.GetActor(),
		Cause:    ev.GetCause(),
		Time:     ev.GetTime().AsTime().UTC(),
	}
	if obj != nil {
		raw, err := protojson.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encode object: %w", err)
		}
		d.Object = raw
	}
	subject := k.GetKind() + "/" + k.GetName()
	if k.GetNamespace() != "" {
		subject = k.GetKind() + "/" + k.GetNamespace() + "/" + k.GetName()
	}
	id := ev.GetId()
	if id == "" {
		id = strconv.FormatUint(ev.GetSequence(), 10)
	}
	return &Event{
		SpecVersion:     "1.0",
		ID:              id,
		Source:          Source,
		Type:            TypePrefix + strings.ToLower(d.Type),
		Subject:         subject,
		Time:            d.Time.Format(time.RFC3339Nano),
		DataContentType: "application/json",
		Sequence:        strconv.FormatUint(d.Sequence, 10),
		Data:            d,
	}, nil
}

// Request is a delivery ready to POST: its headers and body in the content
// mode asked for.
type Request struct {
	Header http.Header
	Body   []byte
}

// Encode lays e out for HTTP in mode (Structured or Binary), signed with key
// at now when key is not empty.
func Encode(e *Event, mode string, key []byte, now time.Time) (*Request, error) {
	h := http.Header{}
	var body []byte
	var err error
	switch mode {
	case Binary:
		if body, err = json.Marshal(e.Data); err != nil {
			return nil, err
		}
		h.Set("Content-Type", "application/json")
		h.Set("ce-specversion", e.SpecVersion)
		h.Set("ce-id", e.ID)
		h.Set("ce-source", e.Source)
		h.Set("ce-type", e.Type)
		h.Set("ce-subject", e.Subject)
		h.Set("ce-time", e.Time)
		h.Set("ce-sequence", e.Sequence)
	default:
		if body, err = json.Marshal(e); err != nil {
			return nil, err
		}
		h.Set("Content-Type", "application/cloudevents+json")
	}
	if len(key) > 0 {
		h.Set(SignatureHeader, Sign(key, now, body))
	}
	return &Request{Header: h, Body: body}, nil
}

// Sign is the value of SignatureHeader for body sent at t.
func Sign(key []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(key, ts, body)
}

func mac(key []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature means a delivery's signature does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks a SignatureHeader value against body and key, refusing a
// timestamp more than tolerance away from now: what a sink does.
func Verify(key []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("%w: header %q lacks t= or v1=", ErrBadSignature, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %s from now", ErrBadSignature, ts, d)
	}
	if !hmac.Equal([]byte(sig), []byte(mac(key, ts, body))) {
		return ErrBadSignature
	}
	return nil
}
