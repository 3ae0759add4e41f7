package events

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// quickAck reads only acknowledgements whose reading by encoding/json (as
// the jetstream client reads them) gives the same sequence and duplicate
// flag, a stream, and no error; everything else is left to that reading.
func TestQuickAckAgreesWithTheClientsReading(t *testing.T) {
	curated := []string{
		`{"stream":"EVENTS", "seq":12}`,
		`{"stream":"EVENTS", "domain":"hub", "seq":12}`,
		`{"stream":"EVENTS", "seq":18446744073709551615,"duplicate": true}`,
		`{"stream":"EVENTS","seq":7,"duplicate":false}`,
		` { "stream" : "EVENTS" , "seq" : 0 } `,
		`{"stream":"EVENTS", "seq":012}`,
		`{"stream":"EVENTS", "seq":18446744073709551616}`,
		`{"stream":"", "seq":12}`,
		`{"seq":12}`,
		`{"stream":"EVENTS"}`,
		`{"stream":"EVENTS", "seq":12, "seq":13}`,
		`{"stream":"EVE\"NTS", "seq":12}`,
		`{"stream":"EVENTS", "seq":12, "batch":"b", "count":1}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}`,
		`{"stream":"EVENTS", "seq":12, "error":{"code":503,"err_code":10077,"description":"x"}}`,
		`{"stream":"EVENTS", "seq":-1}`,
		`{"stream":"EVENTS", "seq":1.5}`,
		`{"stream":"EVENTS", "seq":12,}`,
		`{"stream":"EVENTS", "seq":12}x`,
		`{"stream":"EVENTS", "seq":12, "duplicate": null}`,
		`{"stream":"ÉVENTS", "seq":12}`,
		``, `{}`, `[]`, `null`,
	}
	r := rand.New(rand.NewPCG(3, 4))
	const chars = `{}":, 0123456789"truefalsnx\`
	var inputs []string
	inputs = append(inputs, curated...)
	for range 20000 {
		b := []byte(curated[r.IntN(5)])
		for range 1 + r.IntN(3) {
			switch i := r.IntN(len(b) + 1); r.IntN(3) {
			case 0:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			case 1:
				b = append(b[:i], append([]byte{chars[r.IntN(len(chars))]}, b[i:]...)...)
			default:
				if i < len(b) {
					b[i] = chars[r.IntN(len(chars))]
				}
			}
		}
		inputs = append(inputs, string(b))
	}
	taken := 0
	for _, in := range inputs {
		seq, dup, ok := quickAck([]byte(in))
		if !ok {
			continue
		}
		taken++
		var ack struct {
			Error     *struct{} `json:"error"`
			Stream    string    `json:"stream"`
			Sequence  uint64    `json:"seq"`
			Duplicate bool      `json:"duplicate"`
		}
		if err := json.Unmarshal([]byte(in), &ack); err != nil || ack.Error != nil || ack.Stream == "" || ack.Sequence != seq || ack.Duplicate != dup {
			t.Fatalf("%q: quickAck %d %v; encoding/json %+v, %v", in, seq, dup, ack, err)
		}
	}
	if taken < 5 {
		t.Fatalf("quickAck took only %d inputs", taken)
	}
}
