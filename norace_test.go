//go:build !race

package xtimer

const raceEnabled = false
