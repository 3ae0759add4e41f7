package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/projections"
)

// TestSlowWatchTakesUpAgain is a client that reads its watch more slowly
// than the store changes: the store ends its subscription once it is
// projections.WatchBuffer changes behind, and the stream takes up again
// from the last change it sent instead of ending (client-go would list
// everything again after a watch that ends at once). The client reads
// every change once, in order, and the stream stays open.
func TestSlowWatchTakesUpAgain(t *testing.T) {
	n := projections.WatchBuffer * 2
	st := projections.NewStore(projections.StoreOptions{WatchWindow: 4 * n})
	st.Apply(configMapApplied(1, "cm-0", "0"))
	srv := storeServer(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The client reads nothing until the store has changed n times; each
	// change is large enough that the socket's buffers fill long before.
	big := strings.Repeat("x", 2048)
	for i := range n {
		st.Apply(configMapApplied(uint64(2+i), fmt.Sprint("cm-", i%100), big+strconv.Itoa(i)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	want := uint64(2)
	for want < uint64(2+n) {
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d of %d changes: %v", want-2, n, sc.Err())
		}
		var ev struct {
			Object struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if got := ev.Object.Metadata.ResourceVersion; got != strconv.FormatUint(want, 10) {
			t.Fatalf("change at resourceVersion %s, want %d (none lost or repeated)", got, want)
		}
		want++
	}
	// Still open: the next change arrives on the same stream.
	st.Apply(configMapApplied(uint64(2+n), "after", "1"))
	if !sc.Scan() || !strings.Contains(sc.Text(), `"name":"after"`) {
		t.Fatalf("no change after catching up: %q %v", sc.Text(), sc.Err())
	}
}
