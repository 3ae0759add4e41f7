package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Factory builds a plugin named name from its args (JSON; nil when the
// config gives none).
type Factory func(name string, args json.RawMessage) (Plugin, error)

// Registry maps plugin names to factories. The entry WasmPlugin, when
// present, builds every plugin whose args name a guest module.
type Registry map[string]Factory

// WasmPlugin is the registry name of the WebAssembly plugin factory
// (scheduler/wasm provides it).
const WasmPlugin = "wasm"

// DefaultRegistry holds the built-in plugins.
func DefaultRegistry() Registry {
	noArgs := func(p Plugin) Factory {
		return func(string, json.RawMessage) (Plugin, error) { return p, nil }
	}
	return Registry{
		"NodeName":          noArgs(NodeName{}),
		"NodeUnschedulable": noArgs(NodeUnschedulable{}),
		"TaintToleration":   noArgs(TaintToleration{}),
		"NodeAffinity":      noArgs(NodeAffinity{}),
		"PodTopologySpread": noArgs(PodTopologySpread{}),
		"NodeResourcesFit": func(_ string, args json.RawMessage) (Plugin, error) {
			var a struct {
				ScoringStrategy struct {
					Type      ScoringStrategy  `json:"type"`
					Resources []ResourceWeight `json:"resources"`
				} `json:"scoringStrategy"`
			}
			if err := strictJSON(args, &a); err != nil {
				return nil, err
			}
			switch a.ScoringStrategy.Type {
			case "", LeastAllocated, MostAllocated:
			default:
				return nil, fmt.Errorf("scoringStrategy.type: %q is not LeastAllocated or MostAllocated", a.ScoringStrategy.Type)
			}
			return &NodeResourcesFit{Strategy: a.ScoringStrategy.Type, Resources: a.ScoringStrategy.Resources}, nil
		},
		"NodeResourcesBalancedAllocation": func(_ string, args json.RawMessage) (Plugin, error) {
			var a struct {
				Resources []ResourceWeight `json:"resources"`
			}
			if err := strictJSON(args, &a); err != nil {
				return nil, err
			}
			return &BalancedAllocation{Resources: a.Resources}, nil
		},
	}
}

func strictJSON(data json.RawMessage, v any) error {
	if len(data) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// DefaultPlugins are kube-scheduler's default plugins that jetplane has,
// with their default score weights.
var DefaultPlugins = []PluginRef{
	{Name: "NodeUnschedulable"},
	{Name: "NodeName"},
	{Name: "TaintToleration", Weight: 3},
	{Name: "NodeAffinity", Weight: 2},
	{Name: "NodeResourcesFit", Weight: 1},
	{Name: "PodTopologySpread", Weight: 2},
	{Name: "NodeResourcesBalancedAllocation", Weight: 1},
}

// DefaultSchedulerName is the profile used for pods that name none.
const DefaultSchedulerName = "jetplane"

// Config is the scheduler's configuration file, in the shape of
// kube-scheduler's KubeSchedulerConfiguration (the parts jetplane has).
type Config struct {
	APIVersion               string          `yaml:"apiVersion"`
	Kind                     string          `yaml:"kind"`
	Parallelism              int             `yaml:"parallelism"`
	PercentageOfNodesToScore int32           `yaml:"percentageOfNodesToScore"`
	Profiles                 []ProfileConfig `yaml:"profiles"`
}

// ProfileConfig is one profile.
type ProfileConfig struct {
	SchedulerName            string         `yaml:"schedulerName"`
	PercentageOfNodesToScore *int32         `yaml:"percentageOfNodesToScore"`
	Plugins                  PluginsConfig  `yaml:"plugins"`
	PluginConfig             []PluginConfig `yaml:"pluginConfig"`
}

// PluginsConfig enables and disables plugins, everywhere (multiPoint) or
// at one extension point.
type PluginsConfig struct {
	MultiPoint PluginSet `yaml:"multiPoint"`
	PreFilter  PluginSet `yaml:"preFilter"`
	Filter     PluginSet `yaml:"filter"`
	PostFilter PluginSet `yaml:"postFilter"`
	PreScore   PluginSet `yaml:"preScore"`
	Score      PluginSet `yaml:"score"`
	Reserve    PluginSet `yaml:"reserve"`
	Permit     PluginSet `yaml:"permit"`
	Bind       PluginSet `yaml:"bind"`
	PreBind    PluginSet `yaml:"preBind"`
	PostBind   PluginSet `yaml:"postBind"`
	// QueueSort has one plugin in kube-scheduler; jetplane's queue is
	// its own, so the set is accepted and ignored.
	QueueSort PluginSet `yaml:"queueSort"`
}

// PluginSet is plugins to enable and to disable ("*" disables the defaults).
type PluginSet struct {
	Enabled  []PluginRef `yaml:"enabled"`
	Disabled []PluginRef `yaml:"disabled"`
}

// PluginRef names a plugin and its score weight.
type PluginRef struct {
	Name   string `yaml:"name"`
	Weight int64  `yaml:"weight"`
}

// PluginConfig is a plugin's args.
type PluginConfig struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

// LoadConfig reads a config file (YAML or JSON).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a config; unknown fields are errors.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		if ferr := unknownField(data, reflect.TypeOf(cfg)); ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	return &cfg, nil
}

// DefaultConfig is one profile, "jetplane", with the default plugins.
func DefaultConfig() *Config { return &Config{} }

// Build builds every profile of cfg with plugins from reg. A config
// without profiles has the default one.
func (cfg *Config) Build(reg Registry) (map[string]*Profile, error) {
	if cfg.PercentageOfNodesToScore < 0 || cfg.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("percentageOfNodesToScore: %d is not in [0, 100]", cfg.PercentageOfNodesToScore)
	}
	profiles := cfg.profileConfigs()
	out := map[string]*Profile{}
	for i, pc := range profiles {
		p, err := pc.build(reg, cfg)
		if err != nil {
			return nil, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		if _, dup := out[p.Name]; dup {
			return nil, fmt.Errorf("profiles[%d].schedulerName: %q is used twice", i, p.Name)
		}
		out[p.Name] = p
	}
	return out, nil
}

func (cfg *Config) profileConfigs() []ProfileConfig {
	if len(cfg.Profiles) == 0 {
		return []ProfileConfig{{SchedulerName: DefaultSchedulerName}}
	}
	return cfg.Profiles
}

type point int

const (
	ptPreFilter point = iota
	ptFilter
	ptPostFilter
	ptPreScore
	ptScore
	ptReserve
	ptPermit
	ptBind
	ptPreBind
	ptPostBind
	numPoints
)

func (pc *ProfileConfig) build(reg Registry, cfg *Config) (*Profile, error) {
	name := pc.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	args := map[string]json.RawMessage{}
	for i, c := range pc.PluginConfig {
		if c.Name == "" {
			return nil, fmt.Errorf("pluginConfig[%d].name: required", i)
		}
		data, err := json.Marshal(c.Args)
		if err != nil {
			return nil, fmt.Errorf("pluginConfig[%d].args: %w", i, err)
		}
		args[c.Name] = data
	}
	// Which plugins run, with weights, in order; then per point exceptions.
	type entry struct {
		ref    PluginRef
		points [numPoints]bool
	}
	var list []*entry
	find := func(n string) *entry {
		for _, e := range list {
			if e.ref.Name == n {
				return e
			}
		}
		return nil
	}
	all := func() (p [numPoints]bool) {
		for i := range p {
			p[i] = true
		}
		return p
	}
	mp := pc.Plugins.MultiPoint
	if !slices.ContainsFunc(mp.Disabled, func(r PluginRef) bool { return r.Name == "*" }) {
		for _, r := range DefaultPlugins {
			if !slices.ContainsFunc(mp.Disabled, func(d PluginRef) bool { return d.Name == r.Name }) {
				list = append(list, &entry{ref: r, points: all()})
			}
		}
	}
	for i, r := range mp.Enabled {
		if r.Name == "" {
			return nil, fmt.Errorf("plugins.multiPoint.enabled[%d].name: required", i)
		}
		if e := find(r.Name); e != nil {
			if r.Weight != 0 {
				e.ref.Weight = r.Weight
			}
			continue
		}
		list = append(list, &entry{ref: r, points: all()})
	}
	sets := []struct {
		field string
		set   PluginSet
		pt    point
	}{
		{"preFilter", pc.Plugins.PreFilter, ptPreFilter}, {"filter", pc.Plugins.Filter, ptFilter},
		{"postFilter", pc.Plugins.PostFilter, ptPostFilter}, {"preScore", pc.Plugins.PreScore, ptPreScore},
		{"score", pc.Plugins.Score, ptScore}, {"reserve", pc.Plugins.Reserve, ptReserve},
		{"permit", pc.Plugins.Permit, ptPermit}, {"bind", pc.Plugins.Bind, ptBind},
		{"preBind", pc.Plugins.PreBind, ptPreBind}, {"postBind", pc.Plugins.PostBind, ptPostBind},
	}
	for _, s := range sets {
		for _, d := range s.set.Disabled {
			for _, e := range list {
				if d.Name == "*" || d.Name == e.ref.Name {
					e.points[s.pt] = false
				}
			}
		}
		for i, r := range s.set.Enabled {
			if r.Name == "" {
				return nil, fmt.Errorf("plugins.%s.enabled[%d].name: required", s.field, i)
			}
			e := find(r.Name)
			if e == nil {
				e = &entry{ref: PluginRef{Name: r.Name}}
				list = append(list, e)
			}
			e.points[s.pt] = true
			if r.Weight != 0 {
				e.ref.Weight = r.Weight
			}
		}
	}
	p := &Profile{Name: name, PercentageOfNodesToScore: cfg.PercentageOfNodesToScore, Parallelism: cfg.Parallelism}
	if pc.PercentageOfNodesToScore != nil {
		p.PercentageOfNodesToScore = *pc.PercentageOfNodesToScore
	}
	for _, e := range list {
		f, ok := reg[e.ref.Name]
		a := args[e.ref.Name]
		if !ok {
			var probe struct {
				GuestURL  string `json:"guestURL"`
				GuestPath string `json:"guestPath"`
				Image     string `json:"image"`
			}
			_ = json.Unmarshal(a, &probe)
			f, ok = reg[WasmPlugin]
			if probe.GuestURL == "" && probe.GuestPath == "" && probe.Image == "" || !ok {
				return nil, fmt.Errorf("plugins: unknown plugin %q (a WebAssembly plugin needs pluginConfig args with guestURL, guestPath or image)", e.ref.Name)
			}
		}
		pl, err := f(e.ref.Name, a)
		if err != nil {
			return nil, fmt.Errorf("pluginConfig %s: %w", e.ref.Name, err)
		}
		p.addAt(pl, e.ref.Weight, e.points)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Profile) addAt(pl Plugin, weight int64, pts [numPoints]bool) {
	var q Profile
	q.AddPlugin(pl, weight)
	if pts[ptPreFilter] {
		p.PreFilter = append(p.PreFilter, q.PreFilter...)
	}
	if pts[ptFilter] {
		p.Filter = append(p.Filter, q.Filter...)
	}
	if pts[ptPostFilter] {
		p.PostFilter = append(p.PostFilter, q.PostFilter...)
	}
	if pts[ptPreScore] {
		p.PreScore = append(p.PreScore, q.PreScore...)
	}
	if pts[ptScore] {
		p.Score = append(p.Score, q.Score...)
	}
	if pts[ptReserve] {
		p.Reserve = append(p.Reserve, q.Reserve...)
	}
	if pts[ptPermit] {
		p.Permit = append(p.Permit, q.Permit...)
	}
	if pts[ptBind] {
		p.Bind = append(p.Bind, q.Bind...)
	}
	if pts[ptPreBind] {
		p.PreBind = append(p.PreBind, q.PreBind...)
	}
	if pts[ptPostBind] {
		p.PostBind = append(p.PostBind, q.PostBind...)
	}
}
