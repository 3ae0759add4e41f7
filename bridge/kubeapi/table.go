package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"github.com/jetplane/jetplane/schemas"
)

func kindOf(r resource) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.group, Version: r.version, Kind: r.kind}
}

func typesUID(o *schemas.Object) types.UID { return types.UID(o.GetMetadata().GetUid()) }

// wantTable reports whether the client asks for a Table (kubectl get).
func wantTable(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if strings.Contains(part, "as=Table") && strings.Contains(part, "g=meta.k8s.io") {
			return true
		}
	}
	return false
}

// column is one column of a kind's table: its definition and its cell.
type column struct {
	def  metav1.TableColumnDefinition
	cell func(obj map[string]any) any
}

func col(name, typ string, cell func(map[string]any) any) column {
	return column{def: metav1.TableColumnDefinition{Name: name, Type: typ}, cell: cell}
}

func str(obj map[string]any, path string) string {
	return fieldValue(obj, path)
}

func count(obj map[string]any, fields ...string) any {
	n := 0
	for _, f := range fields {
		if m, ok := obj[f].(map[string]any); ok {
			n += len(m)
		}
	}
	return int64(n)
}

func num(obj map[string]any, path string) int64 {
	var n int64
	_, _ = fmt.Sscan(fieldValue(obj, path), &n)
	return n
}

// kindColumns are the columns kubectl shows for the kinds people look at
// most, between NAME and AGE, as kube-apiserver's printers have them.
var kindColumns = map[string][]column{
	"ConfigMap": {col("Data", "string", func(o map[string]any) any { return count(o, "data", "binaryData") })},
	"Secret": {
		col("Type", "string", func(o map[string]any) any { return str(o, "type") }),
		col("Data", "string", func(o map[string]any) any { return count(o, "data") }),
	},
	"Namespace": {col("Status", "string", func(o map[string]any) any {
		if p := str(o, "status.phase"); p != "" {
			return p
		}
		return "Active"
	})},
	"Pod": {
		col("Ready", "string", func(o map[string]any) any {
			cs, _ := o["spec"].(map[string]any)["containers"].([]any)
			ready := 0
			st, _ := o["status"].(map[string]any)
			if st != nil {
				css, _ := st["containerStatuses"].([]any)
				for _, c := range css {
					if m, ok := c.(map[string]any); ok && m["ready"] == true {
						ready++
					}
				}
			}
			return fmt.Sprintf("%d/%d", ready, len(cs))
		}),
		col("Status", "string", func(o map[string]any) any { return str(o, "status.phase") }),
		col("Restarts", "string", func(o map[string]any) any { return num(o, "status.restartCount") }),
	},
	"Deployment.apps": {
		col("Ready", "string", func(o map[string]any) any {
			return fmt.Sprintf("%d/%d", num(o, "status.readyReplicas"), num(o, "spec.replicas"))
		}),
		col("Up-to-date", "string", func(o map[string]any) any { return num(o, "status.updatedReplicas") }),
		col("Available", "string", func(o map[string]any) any { return num(o, "status.availableReplicas") }),
	},
}

// columns are the columns of r's table: NAME, the kind's own, AGE.
func (r resource) columns() []column {
	name := column{def: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
		Description: "Name must be unique within a namespace."}, cell: func(o map[string]any) any { return str(o, "metadata.name") }}
	age := col("Age", "date", func(o map[string]any) any {
		t, err := time.Parse(time.RFC3339, str(o, "metadata.creationTimestamp"))
		if err != nil {
			return "<unknown>"
		}
		return duration.HumanDuration(time.Since(t))
	})
	cols := []column{name}
	if r.def != nil {
		for _, c := range r.def.Columns(r.version) {
			jp := jsonpath.New(c.Name).AllowMissingKeys(true)
			if err := jp.Parse("{" + c.JSONPath + "}"); err != nil {
				continue
			}
			typ := c.Type
			cols = append(cols, column{
				def: metav1.TableColumnDefinition{Name: c.Name, Type: typ, Format: c.Format, Description: c.Description, Priority: c.Priority},
				cell: func(o map[string]any) any {
					vals, err := jp.FindResults(o)
					if err != nil || len(vals) == 0 || len(vals[0]) == 0 {
						return nil
					}
					v := vals[0][0].Interface()
					if typ == "date" {
						if s, ok := v.(string); ok {
							if t, err := time.Parse(time.RFC3339, s); err == nil {
								return duration.HumanDuration(time.Since(t))
							}
						}
					}
					return v
				},
			})
		}
		return append(cols, age)
	}
	return append(append(cols, kindColumns[r.key()]...), age)
}

// table is objs as a Table; header includes the column definitions (a
// watch sends them with its first event only, as kube-apiserver does).
func (s *Server) table(q *request, objs []map[string]any, header bool) *metav1.Table {
	cols := q.res.columns()
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, Rows: []metav1.TableRow{}}
	if header {
		for _, c := range cols {
			t.ColumnDefinitions = append(t.ColumnDefinitions, c.def)
		}
	}
	include := q.r.URL.Query().Get("includeObject")
	for _, o := range objs {
		row := metav1.TableRow{}
		for _, c := range cols {
			row.Cells = append(row.Cells, c.cell(o))
		}
		switch include {
		case "None":
		case "Object":
			b, _ := json.Marshal(o)
			row.Object = runtime.RawExtension{Raw: b}
		default:
			b, _ := json.Marshal(map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
			row.Object = runtime.RawExtension{Raw: b}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
