//go:build linux && !race

package gateway

// No race detector: the raw calls need no annotation (rawio_race.go).

func raceAfterRead(uintptr, []byte, int) {}
func raceBeforeWrite(uintptr, []byte)    {}
