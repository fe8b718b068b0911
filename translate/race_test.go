//go:build race

package translate_test

// raceEnabled says that the tests run with the race detector.
const raceEnabled = true
