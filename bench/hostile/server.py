#!/usr/bin/env python3
"""Hostile web server for the frontierd hostile-input benchmark (stdlib only).

    python3 server.py PORT

Listens on 127.0.0.1:PORT only and serves many virtual hosts, picked by the first label
of the Host header:

  good<N>.hostile.test     well-behaved: /p0../p1999, small HTML pages linking to more
  <kind>.hostile.test      one hostile behaviour per kind (see KINDS below)
  control.hostile.test     GET /__log: JSON request counts per host, for the driver

Every request is recorded (time, host, path) in memory. Clients hanging up mid-body is
the expected outcome for most hostile kinds, so it is counted, not printed.
"""
import http.server
import json
import sys
import threading
import time
import zlib
from urllib.parse import urlsplit, parse_qs

MIB = 1 << 20
GOOD_PAGES = 2000  # pages per good host
GOOD_FANOUT = 5  # /p<i> links to /p<5i+1>../p<5i+5> (a tree) and /p<i+1> (a chain)

# The hostile kinds; run.py seeds http://<kind>.hostile.test:<port>/ for each.
KINDS = [
    "smapws",  # gzip sitemap: one entry, 60 MiB of spaces, another entry
    "smapbomb",  # gzip sitemap inflating to 1 GiB of XML comments
    "smap60k",  # 60,000-entry sitemap, 5 of 6 under a robots-disallowed /private/
    "hugepage",  # 200 MiB HTML page
    "manylinks",  # HTML page with 1,000,000 links
    "bigheader",  # a response header line of 1 MB
    "robots100k",  # robots.txt of 100,000 lines
    "endless",  # chunked body that never ends
    "gzipgzip",  # Content-Encoding: gzip whose decoded body is another gzip (500 MiB zeros)
]

PORT = 0  # set in main(); URLs inside sitemaps need it


def gzip_stream(chunks, level=9):
    """gzip an iterable of byte chunks incrementally, so only the (small) compressed
    output is ever held in memory, never the gigabyte it inflates to."""
    comp = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: gzip header + trailer
    out = [comp.compress(c) for c in chunks]
    out.append(comp.flush())
    return b"".join(out)


def repeat_to(unit, total, chunk=MIB):
    """Yield `total` bytes made of `unit` repeated, in chunks of about `chunk` bytes."""
    block = unit * (chunk // len(unit))
    left = total
    while left > 0:
        piece = block[:left]
        left -= len(piece)
        yield piece


URLSET_OPEN = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
               b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n')


def url_entry(kind, path):
    return f"<url><loc>http://{kind}.hostile.test:{PORT}{path}</loc></url>\n".encode()


def build_payloads():
    """Everything that is too slow to compute per request, built once at start."""
    p = {}
    t0 = time.time()
    # smapws: a legal sitemap except for one 60 MiB whitespace run between two entries.
    p["smapws"] = gzip_stream([URLSET_OPEN, url_entry("smapws", "/ws-first")]
                              + list(repeat_to(b" ", 60 * MIB))
                              + [url_entry("smapws", "/ws-second"), b"</urlset>\n"])
    # smapbomb: 1 GiB of 64-byte comments after one entry (compresses about 340:1).
    comment = b"<!-- " + b"x" * 54 + b" -->\n"  # exactly 64 bytes
    p["smapbomb"] = gzip_stream(
        [URLSET_OPEN, url_entry("smapbomb", "/bomb-first")]
        + list(repeat_to(comment, 1024 * MIB)) + [b"</urlset>\n"])
    # smap60k: plain XML, 60,000 entries, 5 of 6 under /private/ (disallowed by robots.txt).
    entries = [url_entry("smap60k", f"/pub/{i}" if i % 6 == 0 else f"/private/{i}")
               for i in range(60000)]
    p["smap60k"] = URLSET_OPEN + b"".join(entries) + b"</urlset>\n"
    # robots100k: 100,000 rules (about 1.5 MiB, past Google's 500 KiB reading limit).
    p["robots100k"] = (b"User-agent: *\n"
                       + b"".join(b"Disallow: /x%d\n" % i for i in range(100000)))
    # gzipgzip: gzip of (gzip of 500 MiB of zeros). The outer layer is sent as
    # Content-Encoding, so a decoder that keeps decoding would inflate 500 MiB.
    inner = gzip_stream(repeat_to(b"\0", 500 * MIB))
    p["gzipgzip"] = gzip_stream([inner])
    print(f"payloads built in {time.time() - t0:.1f}s: "
          + ", ".join(f"{k} {len(v)} B" for k, v in p.items()), file=sys.stderr, flush=True)
    return p


PAYLOADS = {}

# Request log and per-host counters, shared by all handler threads.
LOCK = threading.Lock()
REQUESTS = []  # (unix time, host label, path)
HOSTS = {}  # host label -> counters
ERRORS = []  # unexpected server-side exceptions (one line each)
START = time.time()


def host_counters(host):
    c = HOSTS.get(host)
    if c is None:
        c = HOSTS[host] = {"requests": 0, "pages": 0, "robots": 0, "sitemap": 0, "root": 0,
                           "disconnects": 0, "first": None, "last": None, "paths": []}
    return c


def record(host, path):
    now = time.time()
    with LOCK:
        REQUESTS.append((now, host, path))
        c = host_counters(host)
        c["requests"] += 1
        if path == "/robots.txt":
            c["robots"] += 1
        elif path.startswith("/sitemap"):
            c["sitemap"] += 1
        else:
            c["pages"] += 1
            if path == "/":
                c["root"] += 1
        c["first"] = c["first"] or round(now - START, 3)
        c["last"] = round(now - START, 3)
        if len(c["paths"]) < 12 and path not in c["paths"]:
            c["paths"].append(path)  # a sample, to see e.g. whether /ws-second was reached


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies
    server_version = "hostile/1"
    # Above frontierd's pool_idle_timeout (90s), so the server is not the side that
    # closes idle kept connections; also bounds a send to a client that stopped reading.
    timeout = 120
    # Headers and body go out in two writes: with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms a response), which would cap each host at ~20 pages/s.
    disable_nagle_algorithm = True
    host = "?"

    def log_message(self, fmt, *args):
        pass  # one line per request would drown stderr; REQUESTS has them

    def handle(self):
        try:
            super().handle()
        except (ConnectionError, TimeoutError):
            # The crawler cut a body at its cap, timed out, or dropped the connection:
            # exactly what the hostile hosts provoke. Counted, not printed.
            with LOCK:
                host_counters(self.host)["disconnects"] += 1
            self.close_connection = True

    # --- response helpers -------------------------------------------------------------

    def send_body(self, body, ctype="text/html; charset=utf-8", status=200, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def not_found(self):
        self.send_body(b"not found\n", "text/plain", 404)

    def start_chunked(self, ctype="text/html; charset=utf-8"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    # --- dispatch ---------------------------------------------------------------------

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        self.host = label = host.split(".")[0] if host.endswith(".hostile.test") else host
        path = urlsplit(self.path).path
        if label == "control":
            return self.control()
        record(label, path)
        if label.startswith("good") and label[4:].isdigit():
            return self.good(label, path)
        handler = getattr(self, "kind_" + label, None) if label in KINDS else None
        if handler is None:
            return self.not_found()
        if path == "/robots.txt" and label not in ("smapws", "smapbomb", "smap60k",
                                                   "robots100k"):
            return self.not_found()
        return handler(path)

    def control(self):
        query = parse_qs(urlsplit(self.path).query)
        with LOCK:  # serialised under the lock: handler threads keep updating HOSTS
            doc = {"uptime": round(time.time() - START, 3), "requests": len(REQUESTS),
                   "hosts": HOSTS, "errors": ERRORS}
            if "tail" in query:  # the raw log's last N entries
                doc["tail"] = REQUESTS[-int(query["tail"][0]):]
            body = json.dumps(doc).encode()
        self.send_body(body, "application/json")

    def good(self, label, path):
        if not path.startswith("/p") or not path[2:].isdigit() or int(path[2:]) >= GOOD_PAGES:
            return self.not_found()  # robots.txt included: 404, allow all
        i = int(path[2:])
        kids = [GOOD_FANOUT * i + k for k in range(1, GOOD_FANOUT + 1)] + [i + 1]
        links = "".join(f'<li><a href="/p{j}">page {j}</a></li>\n'
                        for j in kids if j < GOOD_PAGES)
        body = (f"<!doctype html>\n<html><head><title>{label} p{i}</title></head><body>\n"
                f"<h1>{label} page {i}</h1>\n<p>A well-behaved page.</p>\n<ul>\n{links}</ul>\n"
                "</body></html>\n").encode()
        self.send_body(body)

    def small_page(self):
        # Any other path of a hostile host (pages its sitemap or links lead to).
        self.send_body(b"<!doctype html>\n<html><body><p>ok</p></body></html>\n")

    def sitemap_robots(self, kind, sitemap_path, extra=""):
        self.send_body((f"User-agent: *\n{extra}"
                        f"Sitemap: http://{kind}.hostile.test:{PORT}{sitemap_path}\n").encode(),
                       "text/plain")

    # --- the hostile kinds ------------------------------------------------------------

    def kind_smapws(self, path):
        if path == "/robots.txt":
            return self.sitemap_robots("smapws", "/sitemap.xml.gz")
        if path == "/sitemap.xml.gz":
            return self.send_body(PAYLOADS["smapws"], "application/gzip")
        self.small_page()

    def kind_smapbomb(self, path):
        if path == "/robots.txt":
            return self.sitemap_robots("smapbomb", "/sitemap.xml.gz")
        if path == "/sitemap.xml.gz":
            return self.send_body(PAYLOADS["smapbomb"], "application/gzip")
        self.small_page()

    def kind_smap60k(self, path):
        if path == "/robots.txt":
            return self.sitemap_robots("smap60k", "/sitemap.xml", "Disallow: /private\n")
        if path == "/sitemap.xml":
            return self.send_body(PAYLOADS["smap60k"], "application/xml")
        self.small_page()

    def kind_hugepage(self, path):
        if path != "/":
            return self.small_page()
        total = 200 * MIB
        head = b"<!doctype html>\n<html><body>\n"
        block = b"<p>" + b"lorem ipsum dolor sit amet " * 36 + b"</p>\n"
        block = block * (64 * 1024 // len(block) + 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        self.wfile.write(head)
        left = total - len(head)
        while left > 0:  # streamed: never more than 64 KiB of it in memory
            piece = block[:min(left, 64 * 1024)]
            self.wfile.write(piece)
            left -= len(piece)

    def kind_manylinks(self, path):
        if path != "/":
            return self.small_page()
        self.start_chunked()
        self.chunk(b"<!doctype html>\n<html><body>\n")
        for start in range(0, 1_000_000, 1000):  # streamed, 1000 links per chunk
            self.chunk("".join(f'<a href="/l{i}">l{i}</a>\n'
                               for i in range(start, start + 1000)).encode())
        self.chunk(b"</body></html>\n")
        self.wfile.write(b"0\r\n\r\n")

    def kind_bigheader(self, path):
        if path != "/":
            return self.small_page()
        self.send_body(b"<!doctype html>\n<html><body><p>big header</p></body></html>\n",
                       headers=[("X-Big", "a" * 1_000_000)])

    def kind_robots100k(self, path):
        if path == "/robots.txt":
            return self.send_body(PAYLOADS["robots100k"], "text/plain")
        self.small_page()

    def kind_endless(self, path):
        if path != "/":
            return self.small_page()
        self.start_chunked()
        self.chunk(b"<!doctype html>\n<html><body>\n")
        piece = (b"<p>" + b"e" * 120 + b"</p>\n") * 32  # 4 KiB
        while True:  # ends when the client hangs up (ConnectionError, caught in handle)
            self.chunk(piece)
            self.wfile.flush()
            time.sleep(0.01)

    def kind_gzipgzip(self, path):
        if path != "/":
            return self.small_page()
        self.send_body(PAYLOADS["gzipgzip"], "text/html; charset=utf-8",
                       headers=[("Content-Encoding", "gzip")])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # an endless response must not keep the process alive
    request_queue_size = 256  # 32 fetch workers may connect at once

    def handle_error(self, request, client_address):
        # Unexpected exceptions only (disconnects are handled in Handler.handle): one line
        # each instead of a traceback, and kept for /__log so run.py can report them.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        line = f"{type(exc).__name__}: {exc}"
        with LOCK:
            ERRORS.append(line)
        print("server error:", line, file=sys.stderr, flush=True)


def main():
    global PORT, PAYLOADS
    if len(sys.argv) != 2:
        sys.exit("usage: server.py PORT")
    PORT = int(sys.argv[1])
    PAYLOADS = build_payloads()
    srv = Server(("127.0.0.1", PORT), Handler)  # loopback only
    print(f"ready on 127.0.0.1:{PORT}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
