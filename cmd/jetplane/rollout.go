package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
	"github.com/jetplane/jetplane/reconcilers/workload"
	"github.com/jetplane/jetplane/schemas"
)

// workloadRef reads KIND/NAME, KIND/NAMESPACE/NAME or KIND NAME, with -n
// (default "default"), for scale and rollout.
func workloadRef(args []string, ns string) (api.Key, error) {
	if ns == "" {
		ns = "default"
	}
	if len(args) == 2 {
		return api.Key{Kind: args[0], Namespace: ns, Name: args[1]}, nil
	}
	return parseRef(args[0], ns)
}

// fetchObject reads k's current object.
func fetchObject(ctx context.Context, c *api.Client, k api.Key) (*schemas.Object, error) {
	raw, err := c.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	return api.DecodeObject(raw)
}

// applyChanged applies obj again, as its writer would with its manifest
// changed: without what jetplane assigns (status, uid, versions).
func applyChanged(ctx context.Context, c *api.Client, obj *schemas.Object) (string, error) {
	o := proto.CloneOf(obj)
	o.Status = nil
	if m := o.Metadata; m != nil {
		m.Uid, m.ResourceVersion, m.Generation, m.CreationTime, m.DeletionTime = "", 0, 0, nil, nil
	}
	doc, err := protojson.Marshal(o)
	if err != nil {
		return "", err
	}
	resp, err := c.Apply(ctx, "", doc, "")
	if err != nil {
		return "", err
	}
	if len(resp.Results) == 0 {
		return "", errors.New("the server applied nothing")
	}
	return resp.Results[0].Action, nil
}

func kindWord(obj *schemas.Object) string {
	return strings.ToLower(obj.GetKind()) + ".apps/" + obj.GetMetadata().GetName()
}

func newScale(g *globals) *cobra.Command {
	var ns string
	var replicas int
	cmd := &cobra.Command{
		Use:   "scale --replicas N KIND/NAME",
		Short: "Set the number of replicas of a Deployment or ReplicaSet",
		Long: `Set spec.replicas of a Deployment or ReplicaSet, as an apply of the object
with only that field changed: the change is an event in its history, by
you. Its controller then creates or deletes pods.`,
		Example: `  jetplane scale --replicas 6 deploy/web -n shop
  jetplane scale deploy web --replicas 0`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if replicas < 0 {
				return usage(errors.New("--replicas: give a number of at least 0"))
			}
			k, err := workloadRef(args, ns)
			if err != nil {
				return err
			}
			c := g.client()
			obj, err := fetchObject(cmd.Context(), c, k)
			if err != nil {
				return err
			}
			switch obj.GetKind() {
			case "Deployment", "ReplicaSet":
			default:
				return usage(fmt.Errorf("%s has no replicas to scale; scale a Deployment or a ReplicaSet", k.Kind))
			}
			obj.Spec.Fields["replicas"] = structpb.NewNumberValue(float64(replicas))
			if _, err := applyChanged(cmd.Context(), c, obj); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s scaled\n", kindWord(obj))
			return nil
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", -1, "the number of replicas")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (default \"default\")")
	_ = cmd.MarkFlagRequired("replicas")
	return cmd
}

func newRollout(g *globals) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "rollout status|history|undo|restart|pause|resume KIND/NAME",
		Short: "Follow, list, undo, restart, pause or resume a Deployment's rollouts",
		Long: `Manage the rollout of a Deployment as kubectl does. Revisions are read from
the Deployment's history in the log, so 'rollout history' lists every
template it ever had, not only the ReplicaSets kept by revisionHistoryLimit;
'rollout undo' applies an earlier template again (a new revision).`,
		Example: `  jetplane rollout status deploy/web -n shop
  jetplane rollout history deploy/web -n shop
  jetplane rollout undo deploy/web -n shop --to-revision 1
  jetplane rollout restart deploy/web -n shop`,
	}
	add := func(use, short string, run func(cmd *cobra.Command, c *api.Client, k api.Key) error) *cobra.Command {
		sub := &cobra.Command{Use: use + " KIND/NAME", Short: short, Args: cobra.RangeArgs(1, 2),
			Example: fmt.Sprintf("  jetplane rollout %s deploy/web -n shop\n  jetplane rollout %s deploy web -n shop", use, use),
			RunE: func(cmd *cobra.Command, args []string) error {
				k, err := workloadRef(args, ns)
				if err != nil {
					return err
				}
				return run(cmd, g.client(), k)
			}}
		cmd.AddCommand(sub)
		return sub
	}
	var timeout time.Duration
	status := add("status", "Wait until the rollout finishes, printing its progress", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		ctx := cmd.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return rolloutStatus(ctx, c, k, cmd.OutOrStdout())
	})
	status.Example += "\n  jetplane rollout status deploy/shop/web --timeout 2m"
	status.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: wait for ever)")
	var revision int
	history := add("history", "List the revisions of a Deployment's template, from the log", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		revs, err := revisions(cmd.Context(), c, k)
		if err != nil {
			return err
		}
		if revision > 0 {
			r, ok := revs.find(revision)
			if !ok {
				return fmt.Errorf("revision %d not found; 'jetplane rollout history %s/%s/%s' lists them", revision, k.Kind, k.Namespace, k.Name)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s with revision #%d\n", k.Name, r.number)
			out, _ := protojson.MarshalOptions{Multiline: true}.Marshal(r.template)
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return nil
		}
		t := &printer.Table{Columns: []string{"REVISION", "SEQ", "TIME", "ACTOR", "IMAGES", "CHANGE-CAUSE"}}
		for _, r := range revs {
			t.Rows = append(t.Rows, []string{fmt.Sprint(r.number), fmt.Sprint(r.seq), r.at.Format(time.RFC3339), r.actor, images(r.template), printer.Dash(r.cause)})
		}
		return t.Write(cmd.OutOrStdout(), false)
	})
	history.Example += "\n  jetplane rollout history deploy/web -n shop --revision 2   # that revision's template"
	history.Flags().IntVar(&revision, "revision", 0, "show the template of this revision")
	var toRevision int
	undo := add("undo", "Apply an earlier revision's template again (default: the one before)", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		revs, err := revisions(cmd.Context(), c, k)
		if err != nil {
			return err
		}
		if len(revs) < 2 && toRevision == 0 {
			return fmt.Errorf("%s has no previous revision to go back to", k.Name)
		}
		target := revs[len(revs)-2]
		if toRevision > 0 {
			var ok bool
			if target, ok = revs.find(toRevision); !ok {
				return fmt.Errorf("revision %d not found; 'jetplane rollout history %s/%s/%s' lists them", toRevision, k.Kind, k.Namespace, k.Name)
			}
		}
		obj, err := fetchObject(cmd.Context(), c, k)
		if err != nil {
			return err
		}
		obj.Spec.Fields["template"] = structpb.NewStructValue(proto.CloneOf(target.template))
		action, err := applyChanged(cmd.Context(), c, obj)
		if err != nil {
			return err
		}
		if action == "unchanged" {
			fmt.Fprintf(cmd.OutOrStdout(), "%s skipped rollback (current template already matches revision %d)\n", kindWord(obj), target.number)
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s rolled back to revision %d\n", kindWord(obj), target.number)
		return nil
	})
	undo.Example += "\n  jetplane rollout undo deploy/web -n shop --to-revision 1"
	undo.Flags().IntVar(&toRevision, "to-revision", 0, "the revision to go back to (default: the previous one)")
	add("restart", "Replace every pod, by a rolling update of an unchanged template", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		return editSpec(cmd, c, k, "restarted", func(spec *structpb.Struct) {
			t := spec.GetFields()["template"].GetStructValue()
			md := t.GetFields()["metadata"].GetStructValue()
			if md == nil {
				md = &structpb.Struct{Fields: map[string]*structpb.Value{}}
				t.Fields["metadata"] = structpb.NewStructValue(md)
			}
			ann := md.GetFields()["annotations"].GetStructValue()
			if ann == nil {
				ann = &structpb.Struct{Fields: map[string]*structpb.Value{}}
				md.Fields["annotations"] = structpb.NewStructValue(ann)
			}
			ann.Fields[workload.AnnotationRestartedAt] = structpb.NewStringValue(time.Now().UTC().Format(time.RFC3339))
		})
	})
	add("pause", "Stop rolling out template changes until resumed", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		return editSpec(cmd, c, k, "paused", func(spec *structpb.Struct) { spec.Fields["paused"] = structpb.NewBoolValue(true) })
	})
	add("resume", "Roll out template changes again", func(cmd *cobra.Command, c *api.Client, k api.Key) error {
		return editSpec(cmd, c, k, "resumed", func(spec *structpb.Struct) { delete(spec.Fields, "paused") })
	})
	cmd.PersistentFlags().StringVarP(&ns, "namespace", "n", "", "namespace (default \"default\")")
	return cmd
}

func editSpec(cmd *cobra.Command, c *api.Client, k api.Key, done string, edit func(*structpb.Struct)) error {
	obj, err := fetchObject(cmd.Context(), c, k)
	if err != nil {
		return err
	}
	if obj.GetKind() != "Deployment" {
		return usage(fmt.Errorf("%s: rollout manages Deployments", k.Kind))
	}
	edit(obj.Spec)
	if _, err := applyChanged(cmd.Context(), c, obj); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", kindWord(obj), done)
	return nil
}

// revision is one template a Deployment had, numbered as Kubernetes
// numbers ReplicaSet revisions: going back to a template makes it the
// newest revision again.
type revision struct {
	number   int
	hash     string
	template *structpb.Struct
	seq      uint64
	at       time.Time
	actor    string
	cause    string
}

type revisionList []revision

func (l revisionList) find(n int) (revision, bool) {
	for _, r := range l {
		if r.number == n {
			return r, true
		}
	}
	return revision{}, false
}

// revisions reads a Deployment's templates from its history, oldest
// revision first.
func revisions(ctx context.Context, c *api.Client, k api.Key) (revisionList, error) {
	_, evs, err := history(ctx, c, k)
	if err != nil {
		return nil, err
	}
	byHash := map[string]revision{}
	n, last := 0, ""
	for _, ev := range evs {
		o := ev.GetObject()
		if ev.GetType() != schemas.EventType_EVENT_TYPE_APPLIED || o.GetSpec() == nil {
			continue
		}
		if o.GetKind() != "Deployment" {
			return nil, fmt.Errorf("%s/%s/%s is a %s; rollout manages Deployments", k.Kind, k.Namespace, k.Name, o.GetKind())
		}
		h := workload.TemplateHash(o)
		if h == "" || h == last {
			continue
		}
		last = h
		n++
		byHash[h] = revision{number: n, hash: h, template: o.GetSpec().GetFields()["template"].GetStructValue(), seq: ev.GetSequence(),
			at: ev.GetTime().AsTime(), actor: ev.GetActor(), cause: o.GetMetadata().GetAnnotations()[workload.AnnotationChangeCause]}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s/%s/%s has no template in its history", k.Kind, k.Namespace, k.Name)
	}
	out := make(revisionList, 0, len(byHash))
	for _, r := range byHash {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b revision) int { return a.number - b.number })
	return out, nil
}

// images lists a template's container images.
func images(t *structpb.Struct) string {
	var out []string
	for _, c := range t.GetFields()["spec"].GetStructValue().GetFields()["containers"].GetListValue().GetValues() {
		out = append(out, c.GetStructValue().GetFields()["image"].GetStringValue())
	}
	return strings.Join(out, ",")
}

// rolloutStatus follows a Deployment until its rollout is complete, as
// kubectl rollout status does, one line per change of progress.
func rolloutStatus(ctx context.Context, c *api.Client, k api.Key, w io.Writer) error {
	last := ""
	for {
		obj, err := fetchObject(ctx, c, k)
		if err != nil {
			return err
		}
		msg, done, err := deploymentProgress(obj)
		if err != nil {
			return err
		}
		if msg != last {
			fmt.Fprintln(w, msg)
			last = msg
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rollout of %s not finished: %w", k.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deploymentProgress is kubectl's message for a Deployment's rollout.
func deploymentProgress(obj *schemas.Object) (string, bool, error) {
	name := obj.GetMetadata().GetName()
	if obj.GetKind() != "Deployment" {
		return "", false, fmt.Errorf("%s: rollout status follows Deployments", obj.GetKind())
	}
	st := obj.GetStatus()
	if st.GetObservedGeneration() < obj.GetMetadata().GetGeneration() {
		return "Waiting for deployment spec update to be observed...", false, nil
	}
	for _, cnd := range st.GetConditions() {
		if cnd.GetType() == workload.ConditionProgressing && cnd.GetReason() == "ProgressDeadlineExceeded" {
			return "", false, fmt.Errorf("deployment %q exceeded its progress deadline", name)
		}
	}
	d := st.GetDetails().GetFields()
	num := func(f string) int { return int(d[f].GetNumberValue()) }
	want := 1
	if v, ok := obj.GetSpec().GetFields()["replicas"]; ok {
		want = int(v.GetNumberValue())
	}
	switch {
	case num("updatedReplicas") < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", name, num("updatedReplicas"), want), false, nil
	case num("replicas") > num("updatedReplicas"):
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", name, num("replicas")-num("updatedReplicas")), false, nil
	case num("availableReplicas") < num("updatedReplicas"):
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", name, num("availableReplicas"), num("updatedReplicas")), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out", name), true, nil
}
