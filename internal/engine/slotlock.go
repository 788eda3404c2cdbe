package engine

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
)

// lockKeeper is the slot-lock keeper. It holds the slot locks this replica
// won (the planner obtains them through it), refreshes them every
// lockRefreshEvery until their minute is over, and gives up a lock it
// cannot refresh (it expired while the process was frozen, or Redis lost
// it): another replica may then take the slot over, and StartFires keeps
// this one from starting what is no longer its own. The planner learns of
// the slots lost from takeLost, at its next tick, and plans them again.
//
// It owns held and lost (mu), and runs one loop.
type lockKeeper struct {
	startstop.Base
	locker  Locker
	clock   Clock
	log     *slog.Logger
	metrics *metrics
	app     string
	replica string // this replica's ID, whose liveness lock it holds (shard.go)

	mu   sync.Mutex
	held map[slotKey]Lock
	lost map[slotKey]time.Time // given up since the last takeLost, and when
	self Lock                  // the liveness lock (keepSelf); nil while not held
}

func newLockKeeper(s *Engine) *lockKeeper {
	return &lockKeeper{locker: s.locker, clock: s.clock, log: s.log, metrics: s.metrics, app: s.opts.App,
		replica: s.opts.InstanceID, held: map[slotKey]Lock{}, lost: map[slotKey]time.Time{}}
}

func (k *lockKeeper) start() error {
	k.keepSelf(context.Background())
	return k.Base.Start(context.Background(), startstop.Every(k.clock, lockRefreshEvery, k.keep))
}

func (k *lockKeeper) lockKey(s slotKey) string {
	return "xtimer:" + k.app + ":slot:" + strconv.FormatInt(s.minute, 10) + ":" + strconv.Itoa(s.bucket)
}

// obtain takes the slot's lock for slotLockTTL and keeps it. Its errors
// are the Locker's (ErrLockHeld when another replica holds it).
func (k *lockKeeper) obtain(ctx context.Context, s slotKey) error {
	lock, err := k.locker.Obtain(ctx, k.lockKey(s), slotLockTTL)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.held[s] = lock
	delete(k.lost, s)
	k.mu.Unlock()
	return nil
}

// holds reports whether this replica holds the slot's lock.
func (k *lockKeeper) holds(s slotKey) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.held[s]
	return ok
}

// heldKeys lists the slots whose locks this replica holds, oldest first.
func (k *lockKeeper) heldKeys() []slotKey {
	k.mu.Lock()
	keys := slices.Collect(maps.Keys(k.held))
	k.mu.Unlock()
	slices.SortFunc(keys, func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.minute, b.minute), cmp.Compare(a.bucket, b.bucket))
	})
	return keys
}

// takeLost returns the slots whose locks were given up since the last
// call, with when, and forgets them.
func (k *lockKeeper) takeLost() map[slotKey]time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.lost) == 0 {
		return nil
	}
	lost := k.lost
	k.lost = map[slotKey]time.Time{}
	return lost
}

// keep refreshes every lock held, and releases those of minutes over.
func (k *lockKeeper) keep(ctx context.Context, now time.Time) {
	k.keepSelf(ctx)
	cur := now.Unix() / 60
	k.mu.Lock()
	held := maps.Clone(k.held)
	k.mu.Unlock()
	for s, lock := range held {
		if s.minute < cur-1 {
			_ = lock.Release(ctx)
			k.drop(s, lock, time.Time{})
			continue
		}
		err := lock.Refresh(ctx, slotLockTTL)
		if err == nil {
			k.metrics.slotClaim(claimRefreshed)
		}
		if err == nil || errors.Is(err, ErrLockUnavailable) {
			continue // unavailable: the database's unique key guards meanwhile
		}
		k.metrics.slotClaim(claimLostWhileHeld)
		k.log.Info("slot lock lost; another replica may take the slot over", "minute", time.Unix(s.minute*60, 0).UTC(),
			"bucket", s.bucket, "err", err)
		k.drop(s, lock, now)
	}
}

// drop forgets a lock, if it is still the one held for the slot, and
// reports the slot lost at lostAt unless that is zero.
func (k *lockKeeper) drop(s slotKey, lock Lock, lostAt time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[s] != lock {
		return
	}
	delete(k.held, s)
	if !lostAt.IsZero() {
		k.lost[s] = lostAt
	}
}

// releaseAll releases every lock held, at Stop.
func (k *lockKeeper) releaseAll(ctx context.Context) {
	k.mu.Lock()
	held, self := k.held, k.self
	k.held, k.self = map[slotKey]Lock{}, nil
	k.mu.Unlock()
	for _, l := range held {
		_ = l.Release(ctx)
	}
	if self != nil {
		_ = self.Release(ctx)
	}
}
