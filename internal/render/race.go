//go:build race

package render

// The race detector keeps shadow memory about three times the size of the
// memory it watches: the child's limits on its resident and writable
// memory grow by as much, so a release that renders without the detector
// renders with it.
const (
	residentFactor = 8
	dataPercent    = 800
)
