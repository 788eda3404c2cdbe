package xtimer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/fakeclock"
)

// The fake clock the tests inject is a Clock, though it does not import xtimer.
var _ Clock = (*fakeclock.Clock)(nil)

func TestClockSystemTimerFiresStopsAndResets(t *testing.T) {
	t.Parallel()
	c := SystemClock()
	before := c.Now()

	tm := c.NewTimer(time.Millisecond)
	select {
	case v := <-tm.C():
		require.False(t, v.Before(before.Add(time.Millisecond)), "fired early: %v", v.Sub(before))
	case <-time.After(5 * time.Second):
		t.Fatal("system timer did not fire")
	}
	require.False(t, tm.Stop(), "already received")

	require.False(t, tm.Reset(time.Hour))
	require.True(t, tm.Stop(), "armed")
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
}
