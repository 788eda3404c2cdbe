package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/xtimer-go/xtimer/internal/startstop"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file holds sharded and broadcast fires (docs/architecture.md,
// "Sharded and broadcast fires"): a fire of a task with WithShards(n) is
// n rows, one per shard, dealt round the live replicas that run the task;
// one of a task with WithBroadcast is one row per such replica. A shard
// belongs to the replica it was dealt to, which may not be the one that
// recorded it, so every replica looks for the shards dealt to it
// (watchShards), and takes over those of a replica that is gone.

const (
	// shardLookahead is how far ahead of its run time a replica finds a
	// shard another replica dealt to it: each tick reads the shards due
	// within it, so a shard recorded ahead is armed seconds before it
	// starts.
	shardLookahead = 3 * time.Second
	// shardGrace is how long past its planned start a shard may wait
	// unstarted before its owner is asked whether it lives: a live owner
	// starts its shards on time unless its pool is full.
	shardGrace = time.Second
	// shardBatch bounds the shards one tick reads.
	shardBatch = 5000
)

// shardedTask is a sharded or broadcast task of the view, as the host
// list needs it.
type shardedTask struct {
	code string
	http bool // an HTTP callback: every replica runs it
}

// isSharded reports whether a task of definition d has sharded or
// broadcast fires.
func isSharded(d *store.Definition) bool { return d != nil && (d.Shards > 0 || d.Broadcast) }

// noteShardedLocked keeps v.sharded, the codes of the sharded and
// broadcast tasks, in step with t, the task's new state (nil: deleted).
// v.mu is held.
func (v *view) noteShardedLocked(code string, t *taskState) {
	now := t != nil && isSharded(t.def())
	if now == v.sharded[code] {
		return
	}
	if now {
		v.sharded[code] = true
	} else {
		delete(v.sharded, code)
	}
	v.shardGen++
}

// shardedTasks lists the sharded and broadcast tasks of the app, by code,
// with the generation of that list.
func (v *view) shardedTasks() ([]shardedTask, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]shardedTask, 0, len(v.sharded))
	for _, code := range slices.Sorted(maps.Keys(v.sharded)) {
		t := v.taskLocked(code)
		out = append(out, shardedTask{code: code, http: t != nil && t.httpSpec() != nil})
	}
	return out, v.shardGen
}

// shardedRunCodes lists the sharded and broadcast tasks this replica
// runs, sorted.
func (v *view) shardedRunCodes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for code := range v.sharded {
		if v.runsHereLocked(code) {
			out = append(out, code)
		}
	}
	slices.Sort(out)
	return out
}

// refreshHosts reads again which of the live replicas run each sharded
// task (the hosts its shards are dealt to), when the live list, the
// sharded tasks or fullSyncEvery changed since the last read. An HTTP
// task runs on every replica; a Go task on those whose row lists its
// handler, and on this one when it has it.
func (p *planner) refreshHosts(ctx context.Context, now time.Time, live []string) error {
	tasks, gen := p.view.shardedTasks()
	p.mu.Lock()
	fresh := gen == p.hostsGen && slices.Equal(live, p.hostsLive) && now.Sub(p.hostsAt) < fullSyncEvery
	p.mu.Unlock()
	if fresh {
		return nil
	}
	keep := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		keep[t.code] = true
	}
	var lists map[string][]string
	if len(tasks) > 0 {
		var err error
		if lists, err = p.store.ReplicaHandlers(ctx, p.opts.App, live, keep); err != nil {
			return err
		}
	}
	has := map[string]map[string]bool{} // code → replicas listing it
	for id, codes := range lists {
		for _, c := range codes {
			if has[c] == nil {
				has[c] = map[string]bool{}
			}
			has[c][id] = true
		}
	}
	hosts := make(map[string][]string, len(tasks))
	for _, t := range tasks {
		for _, id := range live {
			if t.http || has[t.code][id] || (id == p.opts.InstanceID && p.view.runsHere(t.code)) {
				hosts[t.code] = append(hosts[t.code], id)
			}
		}
	}
	p.mu.Lock()
	p.hosts, p.hostsGen, p.hostsLive, p.hostsAt = hosts, gen, slices.Clone(live), now
	p.mu.Unlock()
	return nil
}

// deal names the owner of each shard of t's fire at runMs: the live
// replicas that run t (refreshHosts), but those found dead since
// (ownerDead), dealt round from a place drawn from the fire, so that
// shard 0 is not always on the same replica. A broadcast fire has one
// shard per such replica, in ID order, at most store.MaxShards. Without
// a known host, this replica takes them all if it runs t; otherwise the
// shards are recorded unowned, for a replica that runs t to claim
// (ClaimFires).
func (p *planner) deal(t *taskState, runMs int64, now time.Time) []string {
	p.mu.Lock()
	hosts := slices.DeleteFunc(slices.Clone(p.hosts[t.code]), func(id string) bool { return now.Before(p.dead[id]) })
	p.mu.Unlock()
	if len(hosts) == 0 {
		owner := ""
		if p.view.runsHere(t.code) {
			owner = p.opts.InstanceID
		}
		hosts = []string{owner}
	}
	if t.def().Broadcast {
		return hosts[:min(len(hosts), store.MaxShards)]
	}
	owners := make([]string, max(t.def().Shards, 1))
	from := int(jitterOffset(p.opts.App, t.code, runMs, int64(len(hosts))))
	for i := range owners {
		owners[i] = hosts[(from+i)%len(hosts)]
	}
	return owners
}

// shardRows makes the rows of the shards of each fire of rows, the rows
// of one sharded or broadcast task t: a scheduled fire's shards go to the
// owners deal names; a skipped fire's (misfire, excluded) are recorded
// skipped alike, by the replica that recorded them.
func (p *planner) shardRows(t *taskState, rows []store.Execution, now time.Time) []store.Execution {
	out := make([]store.Execution, 0, len(rows)*max(t.def().Shards, 1))
	for _, r := range rows {
		owners := p.deal(t, r.RunTime, now)
		for i, owner := range owners {
			s := r
			s.Shard, s.Shards, s.Broadcast = i, len(owners), t.def().Broadcast
			if s.Status == store.StatusScheduled {
				s.Replica = owner
			}
			out = append(out, s)
		}
	}
	return out
}

// watchShards arms the shards dealt to this replica that another replica
// recorded (a replica arms what it inserts, so those it learns of from
// their rows), and takes over the unstarted shards of a replica that is
// gone: one shard unstarted shardGrace past its planned start makes its
// owner suspect, and ownerDead decides. The shards of a dead owner due
// within shardLookahead move to this replica (TakeOverShards), but its
// broadcast shards, which are recorded skipped once due. It runs every
// second on a loop of its own (shardLoop), so that a tick busy recording
// the next minute does not hold it up, and costs two queries when the app
// has sharded tasks this replica runs, none otherwise.
func (p *planner) watchShards(ctx context.Context, now time.Time) error {
	codes := p.view.shardedRunCodes()
	if len(codes) == 0 {
		return nil
	}
	dueMs := now.Add(shardLookahead).UnixMilli()
	mine, err := p.store.ShardFires(ctx, p.opts.App, p.opts.InstanceID, codes, dueMs, shardBatch)
	if err != nil {
		return err
	}
	p.forgetShards(now)
	for _, r := range mine {
		p.armShard(r)
	}
	if p.ref.refusing() {
		return nil // its clock is too far off to take over another's shards (clockref.go)
	}
	suspects, err := p.store.LateShardOwners(ctx, p.opts.App, p.opts.InstanceID, codes, now.Add(-shardGrace).UnixMilli())
	if err != nil {
		return err
	}
	p.mu.Lock()
	for id, until := range p.dead { // found dead lately: its shards dealt since are taken as they come due
		if now.Before(until) && !slices.Contains(suspects, id) {
			suspects = append(suspects, id)
		}
	}
	p.mu.Unlock()
	for _, owner := range suspects {
		dead, err := p.ownerDead(ctx, owner, now)
		if err != nil {
			return err
		}
		if !dead {
			continue
		}
		taken, skipped, err := p.store.TakeOverShards(ctx, p.opts.App, owner, codes, dueMs, now.UnixMilli(), p.opts.InstanceID)
		if err != nil {
			return err
		}
		if len(taken) > 0 || skipped > 0 {
			p.log.Info("took over the shards of a replica that is gone", "replica", owner, "shards", len(taken), "broadcast_skipped", skipped)
		}
		for _, r := range taken {
			p.armShard(r)
		}
	}
	return nil
}

// shardLoop runs watchShards every second, on the injected clock.
func (p *planner) shardLoop() startstop.Loop {
	return startstop.Every(p.clock, time.Second, func(ctx context.Context, now time.Time) {
		if err := p.watchShards(ctx, now); err != nil && ctx.Err() == nil {
			p.host.noteDB(err)
		}
	})
}

// armShard arms a shard this replica owns unless it armed it before:
// watchShards reads the shards due soon at every tick, and one it armed
// may be between its claim and its start, or queued for a skip.
func (p *planner) armShard(r store.Execution) {
	p.mu.Lock()
	seen := p.shardArmed[r.ID] != 0
	if !seen {
		p.shardArmed[r.ID] = r.Planned()
	}
	p.mu.Unlock()
	if !seen {
		p.fires.arm(r)
	}
}

// forgetShards drops from shardArmed the shards planned more than
// misfireAfter ago: by then they started, or were skipped.
func (p *planner) forgetShards(now time.Time) {
	before := now.Add(-misfireAfter).UnixMilli()
	p.mu.Lock()
	maps.DeleteFunc(p.shardArmed, func(_ int64, planned int64) bool { return planned < before })
	p.mu.Unlock()
}

// knownDead reports whether ownerDead found id dead lately (within
// ReplicaTimeout, unless its liveness lock was seen held since): its
// shards dealt since are taken over as soon as they are due within
// shardLookahead, without waiting for one to be late.
func (p *planner) knownDead(id string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Before(p.dead[id])
}

// ownerDead reports whether the replica id is gone. Every replica holds
// its liveness lock (lockKeeper.keepSelf) with the slot locks' TTL, so
// winning that lock proves, within the failover gap of a slot, that its
// holder died, froze, lost the lock backend or let its locks go for a
// database outage (lockKeeper.letGo); the lock is given back at once. It
// is tried each time, a replica found dead before included: one seen
// holding its lock again (back from a database outage, which every
// replica of a fleet may have let go for at once) is alive again. With
// the lock backend unavailable, what was found last stands, and the
// heartbeats decide the rest: a replica missing from the live list is
// gone.
func (p *planner) ownerDead(ctx context.Context, id string, now time.Time) (bool, error) {
	dead := false
	lock, err := p.keeper.locker.Obtain(ctx, p.keeper.replicaKey(id), slotLockTTL)
	switch {
	case err == nil:
		_ = lock.Release(ctx)
		dead = true
	case errors.Is(err, ErrLockHeld):
		p.mu.Lock()
		delete(p.dead, id)
		p.mu.Unlock()
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	default:
		p.host.noteRedis(err)
		if p.knownDead(id, now) {
			return true, nil
		}
		p.mu.Lock()
		dead = len(p.live) > 0 && !slices.Contains(p.live, id)
		p.mu.Unlock()
	}
	if dead && !p.knownDead(id, now) {
		p.mu.Lock()
		p.dead[id] = now.Add(p.opts.ReplicaTimeout)
		p.mu.Unlock()
	}
	return dead, nil
}

// replicaKey is the key of replica id's liveness lock.
func (k *lockKeeper) replicaKey(id string) string {
	return k.appKey("replica:" + id)
}

// keepSelf holds this replica's liveness lock, which tells the others it
// lives (ownerDead). keep refreshes it with the slot locks and hands over
// the lock it refreshed (nil: none held) and the outcome; keepSelf obtains
// a lock when there is none, or when that one is lost (it expired while
// the process was frozen, or the backend lost it). A lock not obtained is
// tried again at the next round.
func (k *lockKeeper) keepSelf(ctx context.Context, self Lock, refreshed error) {
	if self != nil {
		if refreshed == nil || errors.Is(refreshed, ErrLockUnavailable) {
			return
		}
		k.log.Info("liveness lock lost; taking it again", "err", refreshed)
	}
	lock, err := k.locker.Obtain(ctx, k.replicaKey(k.replica), slotLockTTL)
	k.noteAnswer(ctx, err)
	if err != nil {
		if ctx.Err() == nil {
			k.log.Debug("liveness lock not obtained; next round tries again", "err", err)
		}
		lock = nil
	}
	k.mu.Lock()
	if k.self == self {
		k.self = lock
		lock = nil
	}
	k.mu.Unlock()
	if lock != nil { // let go (letGo) or released (Stop) meanwhile
		_ = lock.Release(ctx)
	}
}
