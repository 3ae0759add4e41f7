package workload

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

func TestPlanCron(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	i64 := func(v int64) *int64 { return &v }
	yes := true
	created := at("2026-01-01T00:00:30Z")
	tests := []struct {
		name      string
		schedule  string
		spec      batchv1.CronJobSpec
		last      string
		active    int
		now       string
		wantStart string
		replace   bool
		skipped   bool
		wantNext  string
	}{
		{name: "nothing due yet", schedule: "*/5 * * * *", now: "2026-01-01T00:04:59Z", wantNext: "2026-01-01T00:05:00Z"},
		{name: "first start time", schedule: "*/5 * * * *", now: "2026-01-01T00:05:00Z", wantStart: "2026-01-01T00:05:00Z", wantNext: "2026-01-01T00:10:00Z"},
		{name: "already scheduled", schedule: "*/5 * * * *", last: "2026-01-01T00:05:00Z", now: "2026-01-01T00:07:00Z", wantNext: "2026-01-01T00:10:00Z"},
		{name: "missed start times: only the most recent runs", schedule: "*/5 * * * *", last: "2026-01-01T00:05:00Z", now: "2026-01-01T01:02:00Z",
			wantStart: "2026-01-01T01:00:00Z", wantNext: "2026-01-01T01:05:00Z"},
		{name: "past the starting deadline", schedule: "0 * * * *", spec: batchv1.CronJobSpec{StartingDeadlineSeconds: i64(60)},
			last: "2026-01-01T00:00:00Z", now: "2026-01-01T01:02:00Z", wantNext: "2026-01-01T02:00:00Z"},
		{name: "within the starting deadline", schedule: "0 * * * *", spec: batchv1.CronJobSpec{StartingDeadlineSeconds: i64(300)},
			last: "2026-01-01T00:00:00Z", now: "2026-01-01T01:02:00Z", wantStart: "2026-01-01T01:00:00Z", wantNext: "2026-01-01T02:00:00Z"},
		{name: "suspended", schedule: "*/5 * * * *", spec: batchv1.CronJobSpec{Suspend: &yes}, now: "2026-01-01T00:05:00Z", skipped: true, wantNext: "2026-01-01T00:10:00Z"},
		{name: "Allow runs beside an active Job", schedule: "*/5 * * * *", active: 1, now: "2026-01-01T00:05:00Z", wantStart: "2026-01-01T00:05:00Z", wantNext: "2026-01-01T00:10:00Z"},
		{name: "Forbid skips while a Job is active", schedule: "*/5 * * * *", spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ForbidConcurrent},
			active: 1, now: "2026-01-01T00:05:00Z", skipped: true, wantNext: "2026-01-01T00:10:00Z"},
		{name: "Forbid starts once nothing is active", schedule: "*/5 * * * *", spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ForbidConcurrent},
			now: "2026-01-01T00:06:00Z", wantStart: "2026-01-01T00:05:00Z", wantNext: "2026-01-01T00:10:00Z"},
		{name: "Replace deletes the active Job", schedule: "*/5 * * * *", spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ReplaceConcurrent},
			active: 2, now: "2026-01-01T00:05:00Z", wantStart: "2026-01-01T00:05:00Z", replace: true, wantNext: "2026-01-01T00:10:00Z"},
		{name: "time zone", schedule: "0 9 * * *", spec: batchv1.CronJobSpec{TimeZone: ptrTo("Europe/Paris")},
			now: "2026-01-01T08:00:00Z", wantStart: "2026-01-01T08:00:00Z", wantNext: "2026-01-02T08:00:00Z"},
		{name: "every second, long idle", schedule: "@every 1s", last: "2026-01-01T00:00:00Z", now: "2026-01-02T12:00:00Z",
			wantStart: "2026-01-02T12:00:00Z", wantNext: "2026-01-02T12:00:01Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Schedule = tt.schedule
			sched, err := parseSchedule(&spec)
			if err != nil {
				t.Fatal(err)
			}
			var last time.Time
			if tt.last != "" {
				last = at(tt.last)
			}
			got := planCron(sched, &spec, created, last, tt.active, at(tt.now))
			var wantStart time.Time
			if tt.wantStart != "" {
				wantStart = at(tt.wantStart)
			}
			if !got.start.Equal(wantStart) || got.replace != tt.replace || (got.skipped != "") != tt.skipped || !got.next.Equal(at(tt.wantNext)) {
				t.Fatalf("plan = start %v replace %v skipped %q next %v; want start %v replace %v skipped %v next %s",
					got.start, got.replace, got.skipped, got.next, wantStart, tt.replace, tt.skipped, tt.wantNext)
			}
		})
	}
}

func TestParseScheduleRefusesWhatKubernetesRefuses(t *testing.T) {
	for _, s := range []string{"", "61 * * * *", "* * * *", "TZ=UTC * * * * *", "CRON_TZ=UTC * * * * *"} {
		if _, err := parseSchedule(&batchv1.CronJobSpec{Schedule: s}); err == nil {
			t.Errorf("schedule %q accepted", s)
		}
	}
	bad := "Mars/Olympus"
	if _, err := parseSchedule(&batchv1.CronJobSpec{Schedule: "* * * * *", TimeZone: &bad}); err == nil {
		t.Error("an unknown time zone accepted")
	}
}

func TestCronJobNames(t *testing.T) {
	if got := cronJobName("nightly", time.Unix(1767225600, 0)); got != "nightly-29453760" {
		t.Errorf("on a minute: %s", got)
	}
	if got := cronJobName("fast", time.Unix(1767225602, 0)); got != "fast-1767225602" {
		t.Errorf("within a minute: %s", got)
	}
}

func ptrTo[T any](v T) *T { return &v }
