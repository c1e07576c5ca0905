"""A url-frontier client generated with grpcio-tools from frontierd's proto files, driving a
live frontierd (tests/tests/grpc.rs runs it). Nothing here knows frontierd's internals: it
is what a StormCrawler-like fetcher does over the API, plus checks of what it observed.

Usage: urlfrontier_client.py PROTO_DIR GEN_DIR ADDR STATE_FILE COMMAND [ARGS]
  put HOSTS PER_HOST BASE_PORT   PutURLs every URL (with metadata), SetDelay, BlockQueueUntil
  serve SECONDS                  lease and report for SECONDS (0: until every eligible URL is
                                 done), checking what is served; the state file carries what
                                 was acknowledged across daemon restarts (kill -9)
  check                          final checks; prints a JSON summary
"""

import json
import os
import subprocess
import sys
import time


def generate(proto_dir, gen_dir):
    os.makedirs(gen_dir, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir,
         "--python_out=" + gen_dir, "--grpc_python_out=" + gen_dir,
         "urlfrontier.proto", "frontierd.proto"],
        check=True)
    sys.path.insert(0, gen_dir)


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
else:
    fail("unknown command " + COMMAND)
