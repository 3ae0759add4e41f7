//go:build !race

package render

// residentFactor and dataPercent scale the render memory limit into the
// child's limits on its resident and writable memory: room for the
// garbage the collector has not yet returned.
const (
	residentFactor = 2
	dataPercent    = 150
)
