// Package faults holds the fault suite: a cluster of three jetplane
// processes under a steady load of applies and reconciles, with an
// instance killed, a node paused, the log's leader killed, the whole
// cluster restarted and a disk filled, each checked for acknowledged
// changes lost, objects left unconverged and keys run on two instances at
// once. It has no code outside its tests; scripts/faults runs the whole
// suite, and ./scripts/test its short version.
package faults
