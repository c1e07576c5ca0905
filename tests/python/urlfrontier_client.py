"""A url-frontier client generated with grpcio-tools from frontierd's proto files, driving a
live frontierd (tests/tests/grpc.rs runs it). Nothing here knows frontierd's internals: it
is what a StormCrawler-like fetcher does over the API, plus checks of what it observed.

Usage: urlfrontier_client.py PROTO_DIR GEN_DIR ADDR STATE_FILE COMMAND [ARGS]
  put HOSTS PER_HOST BASE_PORT   PutURLs every URL (with metadata), SetDelay, BlockQueueUntil
  serve SECONDS                  lease and report for SECONDS (0: until every eligible URL is
                                 done), checking what is served; the state file carries what
                                 was acknowledged across daemon restarts (kill -9)
  check                          final checks; prints a JSON summary
  crawls-put BASE_PORT           the two-crawl scenario: the same paths in crawls a and b on
                                 shared hosts, crawl c, a crawl limit; DeleteQueue, DeleteCrawl
  crawls-serve GAP_SECS          lease and report every crawl until nothing more comes;
                                 checks what was served and the per-host gap across crawls
  crawls-after                   after a kill -9: deletions and the limit held; the limit
                                 lifted serves the rest
  log-level TARGET LEVEL         SetLogLevel
"""

import json
import os
import sys
import time

from urlfrontier_stubs import generate


PROTO_DIR, GEN_DIR, ADDR, STATE_FILE, COMMAND = sys.argv[1:6]
ARGS = sys.argv[6:]
generate(PROTO_DIR, GEN_DIR)

import grpc  # noqa: E402
import urlfrontier_pb2 as pb  # noqa: E402
import urlfrontier_pb2_grpc as pbg  # noqa: E402
import frontierd_pb2 as fpb  # noqa: E402
import frontierd_pb2_grpc as fpbg  # noqa: E402

LEASE_SECS = 3
# URLs whose first lease is never reported: they must come back after LEASE_SECS
def let_expire(n):
    return n % 97 == 0


def load_state():
    if os.path.exists(STATE_FILE):
        with open(STATE_FILE) as f:
            return json.load(f)
    return {}


def save_state(st):
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.replace(tmp, STATE_FILE)


def fail(msg):
    print("CHECK FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def stub():
    ch = grpc.insecure_channel(ADDR)
    return pbg.URLFrontierStub(ch), fpbg.FrontierdQueuesStub(ch)


def plan(hosts, per_host, port):
    """Every URL with what should become of it."""
    urls = {}
    for n in range(hosts * per_host):
        h = n % hosts
        if h == 2 and n // hosts >= 10:
            h = 12  # h2 (SetDelay 1 s) gets 10 URLs only: the test stays short
        host = "h%d.site.test" % h
        private = h % 10 == 1 and (n // hosts) % 4 == 0
        path = "/private/%d" % n if private else "/p/%d" % n
        url = "http://%s:%d%s" % (host, port, path)
        if h % 10 == 0:
            fate = "held"        # robots.txt answers 503: 5xx-disallow holds the origin
        elif private:
            fate = "disallowed"  # robots.txt: Disallow: /private
        elif h == 3:
            fate = "blocked"     # BlockQueueUntil far in the future
        else:
            fate = "eligible"
        urls[url] = {"n": n, "host": host, "fate": fate}
    return urls


def cmd_put(hosts, per_host, port):
    f, _ = stub()
    urls = plan(hosts, per_host, port)
    # before any serve: a slower queue and a blocked one (both must survive kill -9)
    f.SetDelay(pb.QueueDelayParams(key="h2.site.test", delay_requestable=1))
    f.BlockQueueUntil(pb.BlockQueueParams(key="h3.site.test", time=int(time.time()) + 86400))

    def items():
        for url, u in urls.items():
            info = pb.URLInfo(url=url)
            info.metadata["n"].values.append(str(u["n"]))
            info.metadata["tags"].values.extend(["a", "b"])
            yield pb.URLItem(discovered=pb.DiscoveredURLItem(info=info), ID="id-%d" % u["n"])

    t0 = time.monotonic()
    acks = list(f.PutURLs(items()))
    secs = time.monotonic() - t0
    if len(acks) != len(urls):
        fail("%d acks for %d URLs" % (len(acks), len(urls)))
    bad = [a for a in acks if a.status != pb.AckMessage.OK]
    if bad:
        fail("acks not OK: %s" % bad[:5])
    ids = {a.ID for a in acks}
    if ids != {"id-%d" % u["n"] for u in urls.values()}:
        fail("ack IDs do not echo the client's")
    save_state({"urls": urls, "done": {}, "served": [], "expired_first": {},
                "put_secs": secs, "put_count": len(urls)})
    print(json.dumps({"put": len(urls), "put_secs": secs}))


def cmd_serve(seconds):
    f, _ = stub()
    st = load_state()
    urls = st["urls"]
    # (saved when the command ends: the daemon is killed only between commands)
    done = st["done"]            # url -> wall time its Known ack came back
    served = st["served"]        # [url, key, wall t_request, wall t_received]
    expired_first = st["expired_first"]  # url -> [t_request, t_received] of its unreported lease
    eligible = {u for u, v in urls.items() if v["fate"] == "eligible"}
    deadline = time.time() + (seconds if seconds > 0 else 600)
    get_secs, got = 0.0, 0
    while time.time() < deadline:
        if seconds == 0 and eligible <= set(done):
            break
        t_req = time.time()
        infos = list(f.GetURLs(pb.GetParams(delay_requestable=LEASE_SECS)))
        t_got = time.time()
        get_secs += t_got - t_req
        got += len(infos)
        report = []
        for i in infos:
            if i.url not in urls:
                fail("served a URL never put: %s" % i.url)
            u = urls[i.url]
            if u["fate"] != "eligible":
                fail("served a %s URL: %s" % (u["fate"], i.url))
            if i.url in done:
                fail("served again after its Known(0) was acknowledged: %s" % i.url)
            if list(i.metadata["n"].values) != [str(u["n"])] or list(i.metadata["tags"].values) != ["a", "b"]:
                fail("metadata did not round-trip for %s: %s" % (i.url, i.metadata))
            if i.key != u["host"] or i.crawlID != "DEFAULT":
                fail("key/crawlID %r/%r for %s" % (i.key, i.crawlID, i.url))
            served.append([i.url, i.key, t_req, t_got])
            if let_expire(u["n"]) and i.url not in expired_first:
                expired_first[i.url] = [t_req, t_got]
                continue
            report.append(i.url)
        if report:
            items = [pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=u), refetchable_from_date=0), ID=u)
                     for u in report]
            acks = list(f.PutURLs(iter(items)))
            t_ack = time.time()
            for a in acks:
                if a.status != pb.AckMessage.OK:
                    fail("Known ack %s for %s" % (a.status, a.ID))
                done[a.ID] = t_ack
        if not infos:
            time.sleep(0.02)
    st.update(done=done, served=served, expired_first=expired_first)
    st["get_secs"] = st.get("get_secs", 0.0) + get_secs
    st["got"] = st.get("got", 0) + got
    save_state(st)
    print(json.dumps({"served": len(served), "done": len(done), "eligible": len(eligible)}))


def restart_between(st, t1, t2):
    return any(t1 < r < t2 for r in st.get("restarts", []))


def cmd_check():
    f, x = stub()
    st = load_state()
    urls = st["urls"]
    done = st["done"]
    served = st["served"]
    eligible = {u for u, v in urls.items() if v["fate"] == "eligible"}
    missing = eligible - set(done)
    if missing:
        fail("%d eligible URLs never served and reported, e.g. %s" % (len(missing), sorted(missing)[:3]))
    # expired leases came back, and not before their lease ended
    back = 0
    for url, (t_req, _t_got) in st["expired_first"].items():
        later = [s for s in served if s[0] == url and s[2] > t_req]
        again = [s for s in later if s[3] > t_req]
        if not again:
            fail("expired lease of %s never came back" % url)
        # the second lease was made at least LEASE_SECS after the first: it arrived after
        # the first request plus LEASE_SECS
        first_back = min(s[3] for s in again)
        if first_back < t_req + LEASE_SECS - 0.05 and not restart_between(st, t_req, first_back):
            # (a restart returns every lease at open: earlier is allowed then)
            fail("expired lease of %s came back after %.2fs < %ds" % (url, first_back - t_req, LEASE_SECS))
        back += 1
    # politeness: between two serves of one queue, its gap (min_delay 0.05 s; h2: SetDelay 1 s)
    by_key = {}
    for url, key, t_req, t_got in served:
        by_key.setdefault(key, []).append((t_req, t_got))
    worst = {}
    for key, times in by_key.items():
        times.sort()
        gap = 1.0 if key == "h2.site.test" else 0.05
        for (r1, g1), (r2, g2) in zip(times, times[1:]):
            # the second lease was made after r2 began and before g2; the first before g1:
            # a kept gap implies g2 - r1 >= gap
            if g2 - r1 < gap - 0.005 and not restart_between(st, r1, g2):
                # (frontierd does not flush a lease: after kill -9 the host's last serve
                # may be forgotten, so pairs around a restart are not judged)
                fail("queue %s served twice within %.3fs (gap %.2fs)" % (key, g2 - r1, gap))
            if not restart_between(st, r1, g2):
                worst[key] = min(worst.get(key, 99.0), g2 - r1)
    # SetDelay / BlockQueueUntil survived the kill -9s
    q2 = x.GetQueueState(fpb.QueueStateRequest(key="h2.site.test"))
    q3 = x.GetQueueState(fpb.QueueStateRequest(key="h3.site.test"))
    if q2.client_delay_ms != 1000:
        fail("SetDelay lost: %s" % q2)
    if q3.blocked_until_ms < time.time() * 1000:
        fail("BlockQueueUntil lost: %s" % q3)
    held = x.GetQueueState(fpb.QueueStateRequest(key="h10.site.test"))
    held_states = sorted({o.state for o in held.origins})
    stats = f.GetStats(pb.QueueWithinCrawlParams())
    print(json.dumps({
        "eligible": len(eligible), "done": len(done), "serves": len(served),
        "expired_came_back": back, "h2_min_gap": worst.get("h2.site.test"),
        "held_robots_states": held_states, "in_process": stats.inProcess,
        "put_urls_per_sec": st["put_count"] / st["put_secs"],
        "get_urls_per_sec": st["got"] / st["get_secs"] if st.get("get_secs") else 0,
    }))


# ---------------------------------------------------------------- two crawls

SHARED = ["s0", "s1", "s2", "s3"]


def crawl_plan(port):
    """(crawl, url) pairs put, and what must become of each."""
    pairs = {}
    for h in SHARED:
        for i in range(5):
            url = "http://%s.site.test:%d/p/%d" % (h, port, i)
            pairs[("a", url)] = "deleted-queue" if h == "s1" else "served"
            pairs[("b", url)] = "served"
    for i in range(5):
        pairs[("c", "http://s9.site.test:%d/c/%d" % (port, i))] = "deleted-crawl"
        pairs[("a", "http://s4.site.test:%d/l/%d" % (port, i))] = "limited"
    return pairs


def count(f, crawl, key=""):
    return f.CountURLs(pb.CountUrlParams(crawlID=crawl, key=key)).value


def cmd_crawls_put(port):
    f, _ = stub()
    pairs = crawl_plan(port)

    def items():
        for (crawl, url) in pairs:
            yield pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url, crawlID=crawl)),
                             ID=crawl + " " + url)

    acks = list(f.PutURLs(items()))
    if len(acks) != len(pairs) or any(a.status != pb.AckMessage.OK for a in acks):
        fail("acks: %s" % [a for a in acks if a.status != pb.AckMessage.OK][:5])
    counts = {c: count(f, c) for c in ["a", "b", "c", "DEFAULT"]}
    if counts != {"a": 25, "b": 20, "c": 5, "DEFAULT": 0}:
        fail("counts per crawl: %s" % counts)
    crawls = sorted(f.ListCrawls(pb.Local()).values)
    if not {"a", "b", "c"} <= set(crawls):
        fail("ListCrawls: %s" % crawls)
    dq = f.DeleteQueue(pb.QueueWithinCrawlParams(key="s1.site.test", crawlID="a")).value
    dc = f.DeleteCrawl(pb.DeleteCrawlMessage(value="c")).value
    if (dq, dc) != (5, 5):
        fail("DeleteQueue / DeleteCrawl answered %d / %d, not 5 / 5" % (dq, dc))
    f.SetCrawlLimit(pb.CrawlLimitParams(key="s4.site.test", crawlID="a", limit=2))
    save_state({"pairs": [[c, u, fate] for (c, u), fate in pairs.items()], "served": []})
    print(json.dumps({"put": len(pairs), "deleted_queue": dq, "deleted_crawl": dc,
                      "crawls": crawls}))


def serve_all(f, served, quiet_secs):
    """GetURLs (any crawl) and report until nothing comes for quiet_secs."""
    last = time.time()
    while time.time() - last < quiet_secs:
        t_req = time.time()
        infos = list(f.GetURLs(pb.GetParams(delay_requestable=30, anyCrawlID=pb.AnyCrawlID())))
        t_got = time.time()
        if not infos:
            time.sleep(0.02)
            continue
        last = t_got
        for i in infos:
            served.append([i.crawlID, i.url, i.key, t_req, t_got])
        items = [pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=i.url, crawlID=i.crawlID)),
                            ID=i.crawlID + " " + i.url) for i in infos]
        for a in f.PutURLs(iter(items)):
            if a.status != pb.AckMessage.OK:
                fail("Known ack %s for %s" % (a.status, a.ID))


def cmd_crawls_serve(gap):
    f, _ = stub()
    st = load_state()
    served = st["served"]
    serve_all(f, served, 3.0)
    fate = {(c, u): fa for c, u, fa in st["pairs"]}
    got = [(c, u) for c, u, _k, _r, _g in served]
    if len(got) != len(set(got)):
        fail("a (crawl, URL) served twice: %s" % [p for p in got if got.count(p) > 1][:3])
    for p in got:
        if p not in fate:
            fail("served a URL never put: %s" % (p,))
        if fate[p] in ("deleted-queue", "deleted-crawl"):
            fail("served a %s URL: %s" % (fate[p], p))
    want = {p for p, fa in fate.items() if fa == "served"}
    if not want <= set(got):
        fail("not served: %s" % sorted(want - set(got))[:3])
    limited = [p for p in got if fate[p] == "limited"]
    if len(limited) != 2:
        fail("crawl limit 2 at s4: %d served" % len(limited))
    # one host, two crawls: one gap between any two serves of the host
    by_key, worst = {}, 99.0
    for c, u, k, r, g in served:
        by_key.setdefault(k, []).append((r, g))
    for k, times in by_key.items():
        times.sort()
        for (r1, g1), (r2, g2) in zip(times, times[1:]):
            if g2 - r1 < gap - 0.005:
                fail("host %s served twice within %.3fs across crawls (gap %.2fs)" % (k, g2 - r1, gap))
            worst = min(worst, g2 - r1)
    st["served"] = served
    save_state(st)
    print(json.dumps({"served": len(got), "limited": len(limited), "min_gap": worst}))


def cmd_crawls_after():
    f, _ = stub()
    st = load_state()
    if count(f, "a", "s1.site.test") != 0 or count(f, "c") != 0:
        fail("deleted URLs came back: a@s1 %d, c %d" % (count(f, "a", "s1.site.test"), count(f, "c")))
    if "c" in f.ListCrawls(pb.Local()).values:
        fail("deleted crawl c listed")
    if count(f, "a", "s4.site.test") != 3:
        fail("s4 should keep 3 URLs of crawl a: %d" % count(f, "a", "s4.site.test"))
    served = []
    serve_all(f, served, 1.5)
    if served:
        fail("served after the restart although everything eligible was done: %s" % served[:3])
    f.SetCrawlLimit(pb.CrawlLimitParams(key="s4.site.test", crawlID="a", limit=0))
    serve_all(f, served, 2.0)
    rest = sorted(u for c, u, *_ in served)
    if len(rest) != 3 or any("/l/" not in u for u in rest):
        fail("lifting the limit should serve s4's 3 remaining URLs: %s" % rest)
    print(json.dumps({"after_lift": len(rest)}))


if COMMAND == "put":
    cmd_put(int(ARGS[0]), int(ARGS[1]), int(ARGS[2]))
elif COMMAND == "serve":
    cmd_serve(float(ARGS[0]))
elif COMMAND == "mark-restart":
    s = load_state()
    s.setdefault("restarts", []).append(time.time())
    save_state(s)
    print(json.dumps({"restarts": len(s["restarts"])}))
elif COMMAND == "check":
    cmd_check()
elif COMMAND == "crawls-put":
    cmd_crawls_put(int(ARGS[0]))
elif COMMAND == "crawls-serve":
    cmd_crawls_serve(float(ARGS[0]))
elif COMMAND == "crawls-after":
    cmd_crawls_after()
elif COMMAND == "log-level":
    f, _ = stub()
    f.SetLogLevel(pb.LogLevelParams(package=ARGS[0], level=pb.LogLevelParams.Level.Value(ARGS[1])))
    print(json.dumps({"log_level": ARGS}))
else:
    fail("unknown command " + COMMAND)
