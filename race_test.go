//go:build race

package xtimer

const raceEnabled = true
