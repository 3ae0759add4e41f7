package security

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
)

// A controller credential cannot configure its members bucket's stream:
// a configuration of its choosing could source the keys bucket or other
// controllers' buckets into it, or republish its keys into the log.
// The instances make the bucket, and one made before with another
// configuration is made again.
func TestControllerCannotConfigureItsBucket(t *testing.T) {
	a := start(t, app.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	admin, err := jetstream.New(a.Log().Conn())
	if err != nil {
		t.Fatal(err)
	}
	// As an earlier jetplane let a controller leave it: its bucket
	// sourcing the keys bucket and republishing into the log.
	bad := "KV_" + events.ControllerBucket("widgets")
	if _, err := admin.CreateStream(ctx, jetstream.StreamConfig{
		Name:      bad,
		Subjects:  []string{"$KV." + events.ControllerBucket("widgets") + ".>"},
		Sources:   []*jetstream.StreamSource{{Name: "KV_" + events.KeysBucket}},
		RePublish: &jetstream.RePublish{Source: "$KV." + events.ControllerBucket("widgets") + ".forged", Destination: "jp.in.ConfigMap.shop.forged"},
	}); err != nil {
		t.Fatal(err)
	}

	l, nc, v := connectController(t, a, "gadgets", gadgetKind)
	// The instances made the bucket; the controller joins it.
	members, err := l.Join(ctx, "g-1", events.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer members.Leave(context.Background())
	stream := "KV_" + events.ControllerBucket("gadgets")
	hostile, err := json.Marshal(map[string]any{
		"name":         stream,
		"subjects":     []string{"$KV." + events.ControllerBucket("gadgets") + ".>", "$JS.EVENT.>", "_INBOX.>"},
		"sources":      []map[string]string{{"name": "KV_" + events.KeysBucket}, {"name": "KV_" + events.ControllerBucket("widgets")}},
		"republish":    map[string]string{"src": "$KV." + events.ControllerBucket("gadgets") + ".>", "dest": "jp.in.ConfigMap.shop.forged"},
		"storage":      "file",
		"num_replicas": 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"$JS.API.STREAM.UPDATE." + stream, "$JS.API.STREAM.CREATE." + stream, "$JS.API.STREAM.CREATE.KV_JP_CTL_other"} {
		_, _ = nc.Request(subject, hostile, 2*time.Second)
		v.waitFor(t, subject)
	}
	plain := func(name, bucket string) bool {
		s, err := admin.Stream(ctx, name)
		if err != nil {
			return false
		}
		cfg := s.CachedInfo().Config
		return slices.Equal(cfg.Subjects, []string{"$KV." + bucket + ".>"}) && len(cfg.Sources) == 0 && cfg.Mirror == nil && cfg.RePublish == nil
	}
	if !plain(stream, events.ControllerBucket("gadgets")) {
		t.Fatalf("controller gadgets' bucket is not as the instances made it")
	}

	// The bucket left misconfigured is made again once its controller
	// has a credential.
	connectController(t, a, "widgets", widgetKind)
	pollUntil(t, "widgets' bucket made again", func() bool { return plain(bad, events.ControllerBucket("widgets")) })
}
