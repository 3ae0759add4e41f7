package app

import (
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
)

// reconcilerOf names what reconciles kind for the API ("" when nothing
// does: objects of it are stored only).
func (a *App) reconcilerOf(kind string) string {
	if a.runtime.Handles(kind) {
		return "reconciler/" + kind
	}
	return ""
}

// version describes this process and its log for GET /v1/version.
func (a *App) version() api.Version {
	v := api.Version{Version: BuildVersion(), Partitions: a.log.Partitions(), Replicas: max(1, a.cfg.Log.Replicas)}
	switch {
	case a.cfg.NATS.URLs != "":
		v.Durability = "outside NATS deployment (its own storage settings)"
	case a.cfg.SyncAlways:
		v.Durability = "fsync every event"
	default:
		iv := a.cfg.SyncInterval
		if iv == 0 {
			iv = 2 * time.Minute
		}
		v.Durability = "fsync every " + iv.String()
	}
	if v.Replicas > 1 {
		v.Durability += ", acknowledged by a majority of " + strconv.Itoa(v.Replicas) + " replicas"
	}
	dw := a.cfg.Log.DuplicateWindow
	if dw == 0 {
		dw = 2 * time.Minute
	}
	v.DuplicateWindow = dw.String()
	return v
}

// BuildVersion is the module version the binary was built from, with the
// VCS revision when the build recorded one.
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "(devel)" {
		v = ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			if v == "" {
				v = "devel"
			}
			v += "+" + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "-dirty"
		}
	}
	if v == "" {
		v = "devel"
	}
	return v
}
