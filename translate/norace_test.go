//go:build !race

package translate_test

// raceEnabled is true when the race detector is on.
const raceEnabled = false
