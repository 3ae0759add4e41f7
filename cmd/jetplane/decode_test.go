package main

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

func TestDecodePrintsARawEventAsJSON(t *testing.T) {
	raw, err := proto.Marshal(&schemas.Event{
		Id: "e1", Type: schemas.EventType_EVENT_TYPE_APPLIED, Actor: "user/ann",
		Key: &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "shop", Name: "web"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := newDecode()
	var out bytes.Buffer
	cmd.SetIn(bytes.NewReader(raw))
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"EVENT_TYPE_APPLIED"`, `"actor":"user/ann"`, `"name":"web"`} {
		if !strings.Contains(strings.ReplaceAll(out.String(), " ", ""), want) {
			t.Errorf("decode printed %s; want %s in it", out.String(), want)
		}
	}
	cmd = newDecode()
	cmd.SetIn(strings.NewReader("not protobuf \xff\xff"))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "not a jetplane event") {
		t.Errorf("garbage: %v", err)
	}
}
