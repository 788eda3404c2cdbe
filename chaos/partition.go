package main

// Partitions and slow links (issue 24). When a profile injects any of the
// faults below, every replica slot reaches Redis and PostgreSQL through
// TCP proxies of its own, toxiproxy's, run inside this process; the
// harness's own connections (the checks, FLUSHALL, owner) go direct. A
// fault adds toxics to one replica's proxies and removes them when it
// ends; a restarted process of the slot reuses its proxies.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// The partition fault kinds.
const (
	faultCutRedis faultKind = "cut_redis" // one replica cut from Redis only
	faultCutDB    faultKind = "cut_db"    // from the database only
	faultCutBoth  faultKind = "cut_both"  // from both
	faultSlowDB   faultKind = "slow_db"   // latency and lost connections on its database link
)

var partitionFaults = []faultKind{faultCutRedis, faultCutDB, faultCutBoth, faultSlowDB}

func init() {
	faultOrder = append(faultOrder, partitionFaults...)
	// partition: each kind once, after the rolling deploy (which every
	// profile starts with: a replica without chaos.extra cannot take its
	// fires over).
	profiles["partition"] = profile{
		name: "partition", replicas: 3, tasks: 50, length: 90 * time.Second,
		faults: []faultKind{faultRolling, faultCutRedis, faultCutDB, faultCutBoth, faultSlowDB},
		gapMin: 2 * time.Second, gapMax: 4 * time.Second,
		dbDown: 10 * time.Second, killWait: 3 * time.Second, rollWait: 4 * time.Second,
		cutFor: 10 * time.Second, slowFor: 10 * time.Second,
	}
}

// The slow link (slow_db): every response on the victim's database link
// is delayed by slowLatency ± slowJitter, and, to stand for packet loss
// (toxiproxy drops no single packets), each of its connections is, with
// probability lossToxicity drawn again every lossReroll, one whose next
// request is never answered: lossStall later the proxy closes it. That
// is what a TCP connection shows its client under heavy loss: a request
// without an answer until its retransmissions give up.
const (
	slowLatency  = 200 // ms
	slowJitter   = 100 // ms
	lossToxicity = 0.1
	lossStall    = 1000 // ms
	lossReroll   = time.Second
)

// links are the proxies of the replica slots, by slot index.
type links struct {
	redis []*toxiproxy.Proxy
	db    []*toxiproxy.Proxy
	dsn   []string // the PostgreSQL URL through db[i]
}

// partitioned reports whether the profile injects a partition fault, and
// so runs the replicas through proxies.
func (h *harness) partitioned() bool {
	return slices.ContainsFunc(h.prof.faults, func(k faultKind) bool { return slices.Contains(partitionFaults, k) })
}

// startLinks starts a Redis and a PostgreSQL proxy for every replica slot,
// on free ports, when the profile has partition faults.
func (h *harness) startLinks() error {
	if !h.partitioned() {
		return nil
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	h.onCleanup(func() { _ = srv.Collection.Clear() })
	l := &links{}
	for i := range h.prof.replicas {
		r := toxiproxy.NewProxy(srv, fmt.Sprintf("redis-r%d", i), "127.0.0.1:0", h.redis.addr())
		if err := srv.Collection.Add(r, true); err != nil {
			return fmt.Errorf("toxiproxy %s: %w", r.Name, err)
		}
		d := toxiproxy.NewProxy(srv, fmt.Sprintf("db-r%d", i), "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", h.pg.port))
		if err := srv.Collection.Add(d, true); err != nil {
			return fmt.Errorf("toxiproxy %s: %w", d.Name, err)
		}
		u, err := url.Parse(h.pg.dsn())
		if err != nil {
			return fmt.Errorf("PostgreSQL URL %q: %w", h.pg.dsn(), err)
		}
		u.Host = d.Listen // the address it listens on, once started
		l.redis, l.db, l.dsn = append(l.redis, r), append(l.db, d), append(l.dsn, u.String())
	}
	h.links = l
	var b strings.Builder
	for i := range l.redis {
		fmt.Fprintf(&b, "; r%d: Redis via %s, PostgreSQL via %s", i, l.redis[i].Listen, l.db[i].Listen)
	}
	h.logf("toxiproxy in process%s", b.String())
	return nil
}

// replicaLinks are the PostgreSQL URL and the Redis address replica slot
// idx dials: its proxies, or the servers when there are none.
func (h *harness) replicaLinks(idx int) (dsn, redisAddr string) {
	if h.links == nil {
		if h.redis == nil {
			return h.dsn(), "" // a cluster or Sentinel set: redisArgs names it
		}
		return h.dsn(), h.redis.addr()
	}
	return h.links.dsn[idx], h.links.redis[idx].Listen
}

// addToxic adds toxic t, of toxiproxy type typ, to proxy p: toxiproxy
// takes toxics as the JSON its HTTP API reads.
func addToxic(p *toxiproxy.Proxy, name, stream string, toxicity float32, t toxics.Toxic, typ string) error {
	body, err := json.Marshal(&toxics.ToxicWrapper{Toxic: t, Name: name, Type: typ, Stream: stream, Toxicity: toxicity})
	if err != nil {
		return fmt.Errorf("toxic %s on %s: %w", name, p.Name, err)
	}
	if _, err := p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("toxic %s on %s: %w", name, p.Name, err)
	}
	return nil
}

// cut drops every byte between the slot owner and Redis, the database or
// both, in both directions, on its open connections and on new ones, for
// the profile's cutFor: a partition as its client sees it (the proxy
// still accepts a connection, no answer ever comes; the replica's own
// timeouts end its calls). When the cut heals the proxy closes the
// connections it held, and the replica dials again.
func (h *harness) cut(kind faultKind) {
	victim, codes := h.owner(nil)
	if victim == nil {
		h.logf("%s: no live replica", kind)
		return
	}
	var proxies []*toxiproxy.Proxy
	var what []string
	if kind == faultCutRedis || kind == faultCutBoth {
		proxies, what = append(proxies, h.links.redis[victim.idx]), append(what, "Redis")
	}
	if kind == faultCutDB || kind == faultCutBoth {
		proxies, what = append(proxies, h.links.db[victim.idx]), append(what, "PostgreSQL")
	}
	at := time.Now()
	for _, p := range proxies {
		for _, stream := range []string{"upstream", "downstream"} {
			if err := addToxic(p, "cut_"+stream, stream, 1, &toxics.TimeoutToxic{}, "timeout"); err != nil {
				h.logf("%s: %v", kind, err)
			}
		}
	}
	h.logf("%s: %s cut from %s for %s (recorded ahead fires of %d tasks)", kind, victim.id,
		strings.Join(what, " and "), h.prof.cutFor, len(codes))
	time.Sleep(time.Until(at.Add(h.prof.cutFor)))
	for _, p := range proxies {
		p.Toxics.ResetToxics(context.Background())
	}
	healed := time.Now()
	h.mu.Lock()
	var grace time.Duration
	if kind != faultCutRedis {
		grace = dbCutAfter
	}
	h.failovers = append(h.failovers, failoverRecord{kind: kind, at: at, until: healed,
		victim: victim.id, codes: codes, bounded: true, grace: grace})
	h.mu.Unlock()
	h.logf("%s: %s reaches %s again", kind, victim.id, strings.Join(what, " and "))
}

// slowDB slows the slot owner's database link and loses some of its
// connections (see slowLatency) for the profile's slowFor.
func (h *harness) slowDB() {
	victim, codes := h.owner(nil)
	if victim == nil {
		h.logf("%s: no live replica", faultSlowDB)
		return
	}
	p := h.links.db[victim.idx]
	at := time.Now()
	err := addToxic(p, "latency", "downstream", 1, &toxics.LatencyToxic{Latency: slowLatency, Jitter: slowJitter}, "latency")
	if err == nil {
		err = addToxic(p, "loss", "upstream", lossToxicity, &toxics.ResetToxic{Timeout: lossStall}, "reset_peer")
	}
	if err != nil {
		h.logf("%s: %v", faultSlowDB, err)
	}
	h.logf("%s: %s's database link slowed by %d±%d ms, %.0f%% of its connections lost each %s, for %s (recorded ahead fires of %d tasks)",
		faultSlowDB, victim.id, slowLatency, slowJitter, lossToxicity*100, lossReroll, h.prof.slowFor, len(codes))
	// A toxic's toxicity is drawn when a connection opens or the toxic
	// changes: updating it draws again on every open connection.
	reroll := fmt.Sprintf(`{"toxicity":%g}`, lossToxicity)
	for end := at.Add(h.prof.slowFor); time.Until(end) > 0; {
		time.Sleep(min(lossReroll, time.Until(end)))
		if time.Until(end) > 0 {
			if _, err := p.Toxics.UpdateToxicJson("loss", strings.NewReader(reroll)); err != nil {
				h.logf("%s: %v", faultSlowDB, err)
			}
		}
	}
	p.Toxics.ResetToxics(context.Background())
	h.mu.Lock()
	h.failovers = append(h.failovers, failoverRecord{kind: faultSlowDB, at: at, until: time.Now(),
		victim: victim.id, codes: codes})
	h.mu.Unlock()
	h.logf("%s: %s's database link is clean again", faultSlowDB, victim.id)
}
