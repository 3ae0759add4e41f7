package events

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestParsePubAck(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Result
		wantErr error
		code    jetstream.ErrorCode
	}{
		{name: "stored", data: `{"stream":"jetplane","seq":42}`, want: Result{Sequence: 42}},
		{name: "duplicate as the server writes it", data: `{"stream":"jetplane","seq":7,"duplicate": true}`, want: Result{Sequence: 7, Duplicate: true}},
		{name: "duplicate compact", data: `{"stream":"jetplane","seq":7,"duplicate":true}`, want: Result{Sequence: 7, Duplicate: true}},
		{name: "domain", data: `{"stream":"jetplane","domain":"hub","seq":9}`, want: Result{Sequence: 9}},
		{name: "largest sequence", data: `{"stream":"s","seq":18446744073709551615}`, want: Result{Sequence: 18446744073709551615}},
		{name: "other field order", data: `{"seq":3,"stream":"s"}`, want: Result{Sequence: 3}},
		{name: "spaces", data: `{"stream": "s", "seq": 5}`, want: Result{Sequence: 5}},
		{name: "batch duplicate", data: `{"stream":"s","seq":8,"duplicate": true,"batch":"b","count":2}`, want: Result{Sequence: 8, Duplicate: true}},
		{name: "escaped stream", data: `{"stream":"a\"b","seq":4}`, want: Result{Sequence: 4}},
		{name: "wrong last sequence", data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"s","seq":0}`,
			wantErr: ErrConflict, code: 10071},
		{name: "no stream", data: `{"seq":5}`, wantErr: jetstream.ErrInvalidJSAck},
		{name: "not JSON", data: `+OK`, wantErr: jetstream.ErrInvalidJSAck},
		{name: "truncated", data: `{"stream":"s","seq":5`, wantErr: jetstream.ErrInvalidJSAck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePubAck([]byte(tt.data))
			if tt.wantErr != nil {
				if !errors.Is(translate(err), tt.wantErr) {
					t.Fatalf("parsePubAck(%s) error %v, want %v", tt.data, err, tt.wantErr)
				}
				var api *jetstream.APIError
				if tt.code != 0 && (!errors.As(err, &api) || api.ErrorCode != tt.code) {
					t.Fatalf("parsePubAck(%s) error %v, want an API error with code %d", tt.data, err, tt.code)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parsePubAck(%s) = %+v, %v; want %+v", tt.data, got, err, tt.want)
			}
		})
	}
}

// The fast reading never differs from the JSON decoding it stands in
// for: it answers the same or leaves the input to the decoder.
func FuzzFastPubAckMatchesJSON(f *testing.F) {
	for _, s := range []string{`{"stream":"jetplane","seq":42}`, `{"stream":"j","seq":7,"duplicate": true}`,
		`{"stream":"j","domain":"d","seq":9}`, `{"stream":"j","seq":99999999999999999999}`, `{"stream":"","seq":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := fastPubAck(data)
		if !ok {
			return
		}
		var ack struct {
			Stream    string `json:"stream"`
			Sequence  uint64 `json:"seq"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(data, &ack); err != nil || ack.Stream == "" {
			t.Fatalf("fastPubAck(%q) = %+v, but JSON says %+v, %v", data, fast, ack, err)
		}
		if fast != (Result{Sequence: ack.Sequence, Duplicate: ack.Duplicate}) {
			t.Fatalf("fastPubAck(%q) = %+v, JSON %+v", data, fast, ack)
		}
	})
}
