package integrity_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/chain"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/events/integrity/integritytest"
	"github.com/jetplane/jetplane/internal/testenv"
)

// The chain as the README documents it, computed from JetStream's Get
// Message API alone (what an auditor without jetplane's code reads),
// reaches the head jetplane computes from the files.
func TestAuditorRecomputesHeadFromGetMessage(t *testing.T) {
	dir := t.TempDir()
	const n = 300
	integritytest.Fill(t, dir, 0, n)
	store, err := integrity.OpenStore(dir, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := integrity.Verify(store, events.StreamName, nil, integrity.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatal(rep, err)
	}
	_, nc := testenv.NATSAt(t, dir)
	var h chain.Head
	for seq := uint64(1); seq <= n; seq++ {
		resp, err := nc.Request("$JS.API.STREAM.MSG.GET."+events.StreamName, fmt.Appendf(nil, `{"seq":%d}`, seq), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Message struct {
				Subject string    `json:"subject"`
				Seq     uint64    `json:"seq"`
				Hdrs    []byte    `json:"hdrs"`
				Data    []byte    `json:"data"`
				Time    time.Time `json:"time"`
			} `json:"message"`
		}
		if err := json.Unmarshal(resp.Data, &got); err != nil {
			t.Fatal(err)
		}
		m := got.Message
		h = chain.Next(h, chain.Event{Seq: m.Seq, Time: m.Time.UnixNano(), Subject: []byte(m.Subject), Header: m.Hdrs, Data: m.Data})
	}
	if h != rep.Head {
		t.Fatalf("head from the Get Message API %s, from the files %s", h, rep.Head)
	}
}
