package workload_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/workload"
	"github.com/jetplane/jetplane/schemas"
)

func cronJobYAML(name, arg, policy string, suspend bool) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata: {name: %s, namespace: default}
spec:
  schedule: "@every 1s"
  concurrencyPolicy: %s
  suspend: %v
  successfulJobsHistoryLimit: 2
  failedJobsHistoryLimit: 1
  jobTemplate:
    metadata: {labels: {cron: %s}}
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: task
            image: module:v1
            args: [%s]
`, name, policy, suspend, name, arg)
}

// cronJobs lists the Jobs of the CronJob name that are not being deleted.
func (c *cluster) cronJobs(name string) (all, complete []*schemas.Object) {
	jobs, _ := c.app.Store().List(projections.Query{Kind: workload.KindJob, Namespace: "default"})
	for _, j := range jobs {
		if o, ok := workload.OwnerOf(j.GetMetadata()); !ok || o.Kind != workload.KindCronJob || o.Name != name || j.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		all = append(all, j)
		if j.GetStatus().GetPhase() == workload.PhaseComplete {
			complete = append(complete, j)
		}
	}
	return all, complete
}

// A CronJob on a one-second schedule starts Jobs that run on the node
// agent, keeps two finished ones, stops starting them while suspended,
// and takes its Jobs with it when deleted.
func TestACronJobStartsJobsKeepsItsHistoryAndSuspends(t *testing.T) {
	c := startCluster(t, nil)
	k := projections.Key{Kind: workload.KindCronJob, Namespace: "default", Name: "tick"}
	c.apply(cronJobYAML("tick", "work", "Allow", false))
	seen := map[string]bool{}
	c.poll("four Jobs started, two finished ones kept", 2*time.Minute, func() bool {
		all, complete := c.cronJobs("tick")
		for _, j := range all {
			seen[j.GetMetadata().GetName()] = true
		}
		return len(seen) >= 4 && len(complete) == 2
	})
	// The CronJob records a Job's success at its next run after the Job
	// completes.
	c.poll("lastScheduleTime and lastSuccessfulTime in the status", time.Minute, func() bool {
		det := c.app.Store().Get(k).GetStatus().GetDetails().GetFields()
		return det["lastScheduleTime"].GetStringValue() != "" && det["lastSuccessfulTime"].GetStringValue() != ""
	})

	c.apply(cronJobYAML("tick", "work", "Allow", true))
	c.poll("suspended", 30*time.Second, func() bool { return c.app.Store().Get(k).GetStatus().GetPhase() == workload.PhaseSuspended })
	all, _ := c.cronJobs("tick")
	names := map[string]bool{}
	for _, j := range all {
		names[j.GetMetadata().GetName()] = true
	}
	// Three start times pass while it is suspended: none starts a Job.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		all, _ := c.cronJobs("tick")
		for _, j := range all {
			if !names[j.GetMetadata().GetName()] {
				t.Fatalf("Job %s started while the CronJob was suspended", j.GetMetadata().GetName())
			}
		}
	}

	c.delete(k)
	c.poll("the CronJob, its Jobs and their pods gone", time.Minute, func() bool {
		jobs, _ := c.app.Store().List(projections.Query{Kind: workload.KindJob, Namespace: "default"})
		pods, _ := c.app.Store().List(projections.Query{Kind: "Pod", Namespace: "default"})
		return c.app.Store().Get(k) == nil && len(jobs) == 0 && len(pods) == 0
	})
}

// concurrencyPolicy Forbid starts no Job while one runs; Replace deletes
// the running Job for the next.
func TestACronJobsConcurrencyPolicy(t *testing.T) {
	c := startCluster(t, nil)
	c.apply(cronJobYAML("forbid", "serve", "Forbid", false))
	c.apply(cronJobYAML("replace", "serve", "Replace", false))
	replaced := map[string]bool{}
	c.poll("Replace started three Jobs", time.Minute, func() bool {
		all, _ := c.cronJobs("replace")
		if len(all) > 1 {
			t.Fatalf("Replace: %d Jobs at once", len(all))
		}
		for _, j := range all {
			replaced[j.GetMetadata().GetName()] = true
		}
		return len(replaced) >= 3
	})
	all, _ := c.cronJobs("forbid")
	if len(all) != 1 {
		t.Fatalf("Forbid: %d Jobs, want the one that never ends", len(all))
	}
	if msg := c.app.Store().Get(projections.Key{Kind: workload.KindCronJob, Namespace: "default", Name: "forbid"}).GetStatus().GetMessage(); msg == "" {
		t.Fatal("Forbid: no message")
	}
}

// A CronJob created through the Kubernetes API (client-go, protobuf)
// starts Jobs that the API lists with the CronJob as their controller.
func TestACronJobThroughTheKubernetesAPI(t *testing.T) {
	c := startCluster(t, nil)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.app.URL()})
	if err != nil {
		t.Fatal(err)
	}
	never := corev1.RestartPolicyNever
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: "@every 1s", ConcurrencyPolicy: batchv1.ForbidConcurrent, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: never, Containers: []corev1.Container{{Name: "task", Image: "module:v1", Args: []string{"work"}}}}},
		}}},
	}
	created, err := cs.BatchV1().CronJobs("default").Create(t.Context(), cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.poll("a Job of the CronJob listed by the Kubernetes API", time.Minute, func() bool {
		jobs, err := cs.BatchV1().Jobs("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if refs := j.OwnerReferences; len(refs) == 1 && refs[0].Kind == "CronJob" && refs[0].UID == created.UID && strings.HasPrefix(j.Name, "api-") {
				return true
			}
		}
		return false
	})
	c.poll("lastScheduleTime read back", 30*time.Second, func() bool {
		got, err := cs.BatchV1().CronJobs("default").Get(t.Context(), "api", metav1.GetOptions{})
		return err == nil && got.Status.LastScheduleTime != nil
	})
}
