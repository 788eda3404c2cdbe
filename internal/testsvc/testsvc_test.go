package testsvc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

func TestEachBackendGivesAPrivateEmptyDatabase(t *testing.T) {
	t.Parallel()
	for _, b := range testsvc.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			one, two := b.Open(t), b.Open(t)
			require.Equal(t, b.Name, one.Dialector.Name())

			type probe struct{ ID int64 }
			require.NoError(t, one.AutoMigrate(&probe{}))
			require.NoError(t, one.Create(&probe{ID: 7}).Error)

			var n int64
			require.NoError(t, one.Model(&probe{}).Count(&n).Error)
			require.Equal(t, int64(1), n)
			require.False(t, two.Migrator().HasTable(&probe{}), "a second Open must not see the first one's tables")
		})
	}
}

func TestRedisClientAnswersAndAppsDiffer(t *testing.T) {
	t.Parallel()
	rdb := testsvc.Redis(t)
	a, b := testsvc.App(t), testsvc.App(t)
	require.NotEqual(t, a, b)
	require.Len(t, a, 13)

	ctx := context.Background()
	key := "xtimer:" + a + ":probe"
	require.NoError(t, rdb.Set(ctx, key, "v", 0).Err())
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	got, err := rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
}
