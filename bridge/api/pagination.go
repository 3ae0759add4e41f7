package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Lists and histories come in pages, like Kubernetes lists: ?limit=N
// (default and maximum in Limits) and, for the next page, ?continue= with
// the token the previous page returned. A list's token names the last key
// sent (later pages hold the keys after it in current state; a watch from
// the first page's resourceVersion sees every change made while paging),
// a history's the last sequence sent.

type cursor struct {
	Kind      string `json:"k,omitempty"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"n,omitempty"`
	Seq       uint64 `json:"s,omitempty"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, httpError(http.StatusBadRequest, "continue: not a token this server gave; start again without it")
	}
	return c, nil
}

// pageLimit is the request's page size.
func (s *Server) pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return s.limitsCfg.PageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, httpError(http.StatusBadRequest, fmt.Sprintf("limit: %q is not a positive number", v))
	}
	return min(n, s.limitsCfg.MaxPageSize), nil
}

func compareKey(a, b projections.Key) int {
	switch {
	case a.Kind != b.Kind:
		return cmp(a.Kind, b.Kind)
	case a.Namespace != b.Namespace:
		return cmp(a.Namespace, b.Namespace)
	}
	return cmp(a.Name, b.Name)
}

func cmp(a, b string) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// pageKeys cuts one page out of keys (ordered) and returns it with the
// token of the next page ("" on the last). Only the page's objects are
// then decoded, so paging through a large list costs one list.
func (s *Server) pageKeys(r *http.Request, keys []projections.Key) ([]projections.Key, string, error) {
	limit, err := s.pageLimit(r)
	if err != nil {
		return nil, "", err
	}
	if tok := r.URL.Query().Get("continue"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			return nil, "", err
		}
		after := projections.Key{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
		i, _ := slices.BinarySearchFunc(keys, after, compareKey)
		for i < len(keys) && compareKey(keys[i], after) <= 0 {
			i++
		}
		keys = keys[i:]
	}
	if len(keys) <= limit {
		return keys, "", nil
	}
	last := keys[limit-1]
	return keys[:limit], encodeCursor(cursor{Kind: last.Kind, Namespace: last.Namespace, Name: last.Name}), nil
}

// listPage answers one page of a list. A list that fits one page is read
// as one consistent snapshot (Store.List); a longer one is paged by key
// and only the page's objects are decoded, each at its latest version (a
// watch from the returned sequence replays any change past it).
func (s *Server) listPage(r *http.Request, q projections.Query) ([]*schemas.Object, uint64, string, error) {
	keys, seq := s.cfg.Store.Keys(q)
	page, next, err := s.pageKeys(r, keys)
	if err != nil {
		return nil, 0, "", err
	}
	if next == "" && len(page) == len(keys) {
		objs, seq := s.cfg.Store.List(q)
		return objs, seq, "", nil
	}
	objs := make([]*schemas.Object, 0, len(page))
	for _, k := range page {
		// An object deleted since Keys is left out, as a later list would.
		if o := s.cfg.Store.Get(k); o != nil {
			objs = append(objs, o)
		}
	}
	return objs, seq, next, nil
}
