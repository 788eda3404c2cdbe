package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// A registration large enough to be hashed on several CPUs has the
// digest of one hashed on one, in any order.
func TestDigestOfALargeRegistrationIsItsSumInAnyOrder(t *testing.T) {
	t.Parallel()
	defs := make([]TaskDef, digestSplitFrom+12_345)
	byHour := make([]*Definition, 24)
	for h := range byHour {
		byHour[h] = &Definition{Spec: fmt.Sprintf("0 0 %d * * *", h)}
	}
	for i := range defs {
		code := fmt.Sprintf("job.%07d", i)
		defs[i] = TaskDef{Code: code, Name: code, Def: byHour[i%24]}
	}
	one := digestSum(defs)
	var want [32]byte
	for i, lane := range one {
		binary.BigEndian.PutUint64(want[8*i:], lane)
	}
	require.Equal(t, hex.EncodeToString(want[:]), digestOf(defs))

	shuffled := slices.Clone(defs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	require.Equal(t, digestOf(defs), digestOf(shuffled))
	shuffled[7].Name = "another name"
	require.NotEqual(t, digestOf(defs), digestOf(shuffled))
}
