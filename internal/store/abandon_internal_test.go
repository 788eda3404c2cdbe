package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/xtimer-go/xtimer/internal/testsvc"
)

// Every transaction of the store on PostgreSQL tells the server to end it
// if its client goes silent for abandonAfter (a replica cut off in the
// middle of it), and only that transaction: the pool's connections keep
// the server's default for the application's own transactions.
func TestTransactionsAreAbandonedByTheServerWhenTheirClientGoesSilent(t *testing.T) {
	t.Parallel()
	ctx, db, s, showSetting := oneSession(t)
	show := func(tx *gorm.DB) string { return showSetting(tx, "idle_in_transaction_session_timeout") }
	before := show(db.WithContext(ctx))
	var inside string
	require.NoError(t, s.rowTx(ctx, func(tx *gorm.DB) error {
		inside = show(tx)
		return nil
	}))
	require.Equal(t, "2s", inside)
	require.Equal(t, before, show(db.WithContext(ctx)), "SET LOCAL: the session's own value after the transaction")
	require.NoError(t, db.Transaction(func(tx *gorm.DB) error {
		require.Equal(t, before, show(tx), "an application's transaction on the same pool")
		return nil
	}))
}

// A transaction of customPlanTx is abandoned as rowTx's is, and has its
// statements planned for their own values; both settings are its own.
func TestCustomPlanTransactionsSetBothForThemselvesOnly(t *testing.T) {
	t.Parallel()
	ctx, db, s, show := oneSession(t)
	beforeIdle, beforePlans := show(db.WithContext(ctx), "idle_in_transaction_session_timeout"), show(db.WithContext(ctx), "plan_cache_mode")
	require.NotEqual(t, "force_custom_plan", beforePlans)
	require.NoError(t, s.customPlanTx(ctx, func(tx *gorm.DB) error {
		require.Equal(t, "2s", show(tx, "idle_in_transaction_session_timeout"))
		require.Equal(t, "force_custom_plan", show(tx, "plan_cache_mode"))
		return nil
	}))
	require.Equal(t, beforeIdle, show(db.WithContext(ctx), "idle_in_transaction_session_timeout"))
	require.Equal(t, beforePlans, show(db.WithContext(ctx), "plan_cache_mode"))
}

// oneSession opens a Store on a PostgreSQL pool of one connection, so
// that a transaction and the reads after it share one session, and a
// function that reads a setting of the session (or of tx's transaction).
func oneSession(t *testing.T) (context.Context, *gorm.DB, *Store, func(tx *gorm.DB, name string) string) {
	t.Helper()
	db := testsvc.Postgres(t)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1)
	show := func(tx *gorm.DB, name string) string {
		var v string
		require.NoError(t, tx.Raw("SHOW "+name).Scan(&v).Error)
		return v
	}
	return context.Background(), db, New(db), show
}
