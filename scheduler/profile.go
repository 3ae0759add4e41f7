package scheduler

import (
	"context"
	"fmt"
)

// Profile is one scheduler (a schedulerName): the plugins at each extension
// point, in order, and the knobs of the cycle. A Profile is immutable once
// built and safe for concurrent use as far as its plugins are.
type Profile struct {
	// Name is the schedulerName pods ask for.
	Name       string
	PreFilter  []PreFilterPlugin
	Filter     []FilterPlugin
	PostFilter []PostFilterPlugin
	PreScore   []PreScorePlugin
	Score      []WeightedScore
	Reserve    []ReservePlugin
	Permit     []PermitPlugin
	Bind       []BindPlugin
	PreBind    []PreBindPlugin
	PostBind   []PostBindPlugin
	// PercentageOfNodesToScore bounds how many feasible nodes a cycle looks
	// for, as kube-scheduler's setting of that name: 0 adapts to the
	// cluster size (50% minus 1% per 125 nodes, at least 5%), and at least
	// 100 nodes are always looked for.
	PercentageOfNodesToScore int32
	// Parallelism is how many goroutines run Filter and Score (default
	// 16), no more than the process has cores (decision 0092).
	Parallelism int
}

// WeightedScore is a score plugin and its weight.
type WeightedScore struct {
	Plugin ScorePlugin
	Weight int64
}

// Versions lists every plugin of the profile with its version ("" for
// plugins that do not say).
func (p *Profile) Versions() map[string]string {
	out := map[string]string{}
	for name, pl := range p.plugins() {
		v := ""
		if vp, ok := pl.(Versioned); ok {
			v = vp.Version()
		}
		out[name] = v
	}
	return out
}

// plugins are the profile's plugins by name.
func (p *Profile) plugins() map[string]Plugin {
	out := map[string]Plugin{}
	add := func(pl Plugin) { out[pl.Name()] = pl }
	for _, pl := range p.PreFilter {
		add(pl)
	}
	for _, pl := range p.Filter {
		add(pl)
	}
	for _, pl := range p.PostFilter {
		add(pl)
	}
	for _, pl := range p.PreScore {
		add(pl)
	}
	for _, pl := range p.Score {
		add(pl.Plugin)
	}
	for _, pl := range p.Reserve {
		add(pl)
	}
	for _, pl := range p.Permit {
		add(pl)
	}
	for _, pl := range p.PreBind {
		add(pl)
	}
	for _, pl := range p.Bind {
		add(pl)
	}
	for _, pl := range p.PostBind {
		add(pl)
	}
	return out
}

// Interested reports whether a change of resource by action may make a
// pod that the plugins rejectedBy turned down schedulable: whether one of
// them registered a matching event, or registers none (every event).
// Events are asked of a plugin each time; plugins answer from memory.
func (p *Profile) Interested(ctx context.Context, rejectedBy []string, resource string, action ActionType) bool {
	if len(rejectedBy) == 0 {
		return true
	}
	all := p.plugins()
	for _, name := range rejectedBy {
		ee, ok := all[name].(EnqueueExtensions)
		if !ok {
			return true
		}
		for _, e := range ee.EventsToRegister(ctx) {
			if e.Matches(resource, action) {
				return true
			}
		}
	}
	return false
}

// AddPlugin puts pl at every extension point it implements, with weight for
// Score (0 means 1).
func (p *Profile) AddPlugin(pl Plugin, weight int64) {
	if weight == 0 {
		weight = 1
	}
	if pp, ok := pl.(PartialPlugin); ok {
		p.addPartial(pp, weight)
		return
	}
	if x, ok := pl.(PreFilterPlugin); ok {
		p.PreFilter = append(p.PreFilter, x)
	}
	if x, ok := pl.(FilterPlugin); ok {
		p.Filter = append(p.Filter, x)
	}
	if x, ok := pl.(PostFilterPlugin); ok {
		p.PostFilter = append(p.PostFilter, x)
	}
	if x, ok := pl.(PreScorePlugin); ok {
		p.PreScore = append(p.PreScore, x)
	}
	if x, ok := pl.(ScorePlugin); ok {
		p.Score = append(p.Score, WeightedScore{Plugin: x, Weight: weight})
	}
	if x, ok := pl.(ReservePlugin); ok {
		p.Reserve = append(p.Reserve, x)
	}
	if x, ok := pl.(PermitPlugin); ok {
		p.Permit = append(p.Permit, x)
	}
	if x, ok := pl.(BindPlugin); ok {
		p.Bind = append(p.Bind, x)
	}
	if x, ok := pl.(PreBindPlugin); ok {
		p.PreBind = append(p.PreBind, x)
	}
	if x, ok := pl.(PostBindPlugin); ok {
		p.PostBind = append(p.PostBind, x)
	}
}

func (p *Profile) validate() error {
	if p.Name == "" {
		return fmt.Errorf("profile: schedulerName: required")
	}
	if p.PercentageOfNodesToScore < 0 || p.PercentageOfNodesToScore > 100 {
		return fmt.Errorf("profile %s: percentageOfNodesToScore: %d is not in [0, 100]", p.Name, p.PercentageOfNodesToScore)
	}
	return nil
}

// numFeasibleNodesToFind is how many feasible nodes a cycle looks for
// before it stops filtering, as kube-scheduler computes it.
func (p *Profile) numFeasibleNodesToFind(numAll int) int {
	const minFeasible = 100
	if numAll < minFeasible {
		return numAll
	}
	pct := int(p.PercentageOfNodesToScore)
	if pct == 0 {
		pct = 50 - numAll/125
		if pct < 5 {
			pct = 5
		}
	}
	if pct >= 100 {
		return numAll
	}
	n := numAll * pct / 100
	if n < minFeasible {
		return minFeasible
	}
	return n
}

// Extension points, as PartialPlugin names them.
const (
	PointPreFilter  = "PreFilter"
	PointFilter     = "Filter"
	PointPostFilter = "PostFilter"
	PointPreScore   = "PreScore"
	PointScore      = "Score"
	PointReserve    = "Reserve"
	PointPermit     = "Permit"
	PointPreBind    = "PreBind"
	PointBind       = "Bind"
	PointPostBind   = "PostBind"
)

// PartialPlugin is a plugin whose type has every extension point's
// methods but which implements only some of them, known when it is loaded
// (a WebAssembly guest): AddPlugin puts it only at the points Implements
// accepts.
type PartialPlugin interface {
	Plugin
	Implements(point string) bool
}

func (p *Profile) addPartial(pl PartialPlugin, weight int64) {
	addAt(pl, PointPreFilter, &p.PreFilter)
	addAt(pl, PointFilter, &p.Filter)
	addAt(pl, PointPostFilter, &p.PostFilter)
	addAt(pl, PointPreScore, &p.PreScore)
	if x, ok := pl.(ScorePlugin); ok && pl.Implements(PointScore) {
		p.Score = append(p.Score, WeightedScore{Plugin: x, Weight: weight})
	}
	addAt(pl, PointReserve, &p.Reserve)
	addAt(pl, PointPermit, &p.Permit)
	addAt(pl, PointPreBind, &p.PreBind)
	addAt(pl, PointBind, &p.Bind)
	addAt(pl, PointPostBind, &p.PostBind)
}

// addAt appends pl to list when it has the point's methods (T) and
// implements the point.
func addAt[T any](pl PartialPlugin, point string, list *[]T) {
	if x, ok := pl.(T); ok && pl.Implements(point) {
		*list = append(*list, x)
	}
}
