package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// A CronJob's describe shows the pod template of its jobTemplate; a kind
// without a pod template shows no Containers section.
func TestDescribeContainersOfTemplates(t *testing.T) {
	spec, err := structpb.NewStruct(map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "task", "image": "m:v1", "envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "settings"}}}}},
	}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	describeContainers(&b, &schemas.Object{ApiVersion: "batch/v1", Kind: "CronJob", Spec: spec}, time.Now())
	want := "Pod Template:\n  Containers:\n    task:\n      Image:           m:v1\n      Environment:\n        <all keys of ConfigMap settings>  Optional: false\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	cm, _ := structpb.NewStruct(map[string]any{"template": "not a pod"})
	describeContainers(&b, &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Spec: cm}, time.Now())
	if b.Len() != 0 {
		t.Errorf("a ConfigMap: %q", b.String())
	}
}
