package app_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// TestASubscriberDecodesEventsWithOnlyTheProtoFiles reads a raw event from
// the stream with a subscriber credential, as an outside system does, and
// decodes it with nothing of jetplane's but the published .proto files,
// compiled here at run time; then checks jetplane decode prints the same.
func TestASubscriberDecodesEventsWithOnlyTheProtoFiles(t *testing.T) {
	a, c := startApp(t, app.Config{})
	resp := mustApply(t, c, cm("proto", "app: web", "greeting: hello"))
	seq := resp.Results[0].ResourceVersion
	if seq == 0 {
		var o struct {
			Metadata struct {
				ResourceVersion uint64 `json:"resourceVersion,string"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(resp.Results[0].Object, &o)
		seq = o.Metadata.ResourceVersion
	}

	// The subscriber's side: its credential, a direct get of the event.
	data, err := a.Creds().Create(auth.RoleSubscriber, "audit")
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "audit.creds")
	if err := os.WriteFile(creds, data, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := events.CredsOptions(creds)
	if err != nil {
		t.Fatal(err)
	}
	var nc *nats.Conn
	deadline := time.Now().Add(wait)
	for {
		if nc, err = nats.Connect(a.NATSURL(), opts...); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]uint64{"seq": seq})
	msg, err := nc.Request("$JS.API.STREAM.MSG.GET."+events.StreamName, req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Message struct {
			Subject string `json:"subject"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *struct{ Description string } `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &got); err != nil || got.Error != nil {
		t.Fatalf("get message %d: %v %+v", seq, err, got.Error)
	}

	// Only the .proto files: compile them and decode dynamically.
	compiler := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		ImportPaths: []string{"../../schemas/proto"},
	})}
	files, err := compiler.Compile(context.Background(), "jetplane/v1/event.proto")
	if err != nil {
		t.Fatal(err)
	}
	desc := files[0].Messages().ByName(protoreflect.Name("Event"))
	if desc == nil {
		t.Fatal("jetplane/v1/event.proto has no message Event")
	}
	ev := dynamicpb.NewMessage(desc)
	if err := proto.Unmarshal(got.Message.Data, ev); err != nil {
		t.Fatalf("decode with the .proto files: %v", err)
	}
	js, err := protojson.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Type string `json:"type"`
		Key  struct {
			Kind, Namespace, Name string
		} `json:"key"`
		Object struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(js, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.Type != "EVENT_TYPE_APPLIED" || decoded.Key.Kind != "ConfigMap" || decoded.Key.Name != "proto" || decoded.Object.Metadata.Labels["app"] != "web" {
		t.Fatalf("decoded with the .proto files: %s", js)
	}
	if got.Message.Subject == "" {
		t.Fatal("no subject")
	}
	t.Logf("subject %s: %s", got.Message.Subject, js)
}
