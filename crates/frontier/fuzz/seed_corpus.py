#!/usr/bin/env python3
"""Seed fuzz/corpus/decode_records with well-formed frontier records (not committed).

    python3 seed_corpus.py

One file per record: host records of versions 1, 2 and 3 (with and without a lease list
and journal stamp), queue entries of versions 1, 2 and 3, segments (and a legacy one-entry
value), intake-log records, seen buckets and drop records (versions 1 and 2), written as the
formats in
crates/frontier/src/{codec,packed}.rs describe them.
"""
import hashlib
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "decode_records")
os.makedirs(out, exist_ok=True)


def varint(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


def host_v3(fields, leases=None, stamp=None):
    b = bytes([3]) + b"".join(varint(f) for f in fields)
    if leases is not None:
        b += varint(len(leases)) + b"".join(varint(s) for s in leases)
        if stamp is not None:
            b += varint(stamp)
    return b


def host_fixed(ver, fields, leases=None, stamp=None):
    b = bytes([ver]) + b"".join(struct.pack("<Q", f) for f in fields)
    if leases is not None:
        b += struct.pack("<Q", len(leases)) + b"".join(struct.pack("<Q", s) for s in leases)
        if stamp is not None:
            b += struct.pack("<Q", stamp)
    return b


def lstr(s):
    return varint(len(s)) + s


def queue(url, attempts=0, depth=0, ver=2, via=b"", hops=b""):
    if ver == 1:
        return bytes([1]) + struct.pack("<I", attempts) + url
    if ver == 3:
        return bytes([3]) + struct.pack("<II", attempts, depth) + lstr(hops) + lstr(via) + url
    return bytes([2]) + struct.pack("<II", attempts, depth) + url


def segment(entries):
    b = bytearray([0x10]) + struct.pack("<I", len(entries))
    end = 0
    for e in entries:
        end += len(e)
        b += struct.pack("<I", end)
    return bytes(b) + b"".join(entries)


def intake(items):
    b = bytearray([0x30])
    for host, seq, e in items:
        b += struct.pack("<QQI", host, seq, len(e)) + e
    return bytes(b)


def bucket(hashes):
    return bytes([0x20]) + b"".join(h.to_bytes(16, "big") for h in hashes)


def drop(reason, at_ms, detail, url, found=None):
    if found is None:
        return bytes([1, reason]) + struct.pack("<QI", at_ms, len(detail)) + detail + url
    depth, hops, via = found
    return (bytes([2, reason]) + struct.pack("<QI", at_ms, len(detail)) + detail
            + struct.pack("<I", depth) + lstr(hops) + lstr(via) + url)


urls = [b"http://a/", b"https://example.com/x?y=1", "http://\u00e9.fr/\u2603".encode(), b""]
small = [7, 99, 0, 2, 1_700_000_000_000, 0, 120, 0] + list(range(10)) + [42]
big = [2**64 - 1, 2**63, 2**35] + [0] * 15 + [2**40]
seeds = {
    "host_v3": host_v3(small),
    "host_v3_leases": host_v3(small, [3, 9, 2**50]),
    "host_v3_stamped": host_v3(small, [4], 77),
    "host_v3_big": host_v3(big, [2**64 - 1], 2**64 - 1),
    "host_v3_empty_leases": host_v3([0] * 19, []),
    "host_v2": host_fixed(2, small),
    "host_v2_stamped": host_fixed(2, small, [5, 6], 8),
    "host_v1": host_fixed(1, small[:18]),
    "host_v1_leases": host_fixed(1, small[:18], [33], 8),
    "host_v2_short": host_fixed(2, small[:4]),
    "queue_v2": queue(urls[1], 2, 3),
    "queue_v1": queue(urls[0], 1, ver=1),
    "queue_utf8": queue(urls[2], 0, 7),
    "queue_v3": queue(urls[1], 1, 2, ver=3, via=urls[0], hops=b"LR"),
    "queue_v3_seed": queue(urls[0], ver=3),
    "queue_v3_long_hops": queue(urls[2], 0, 60, ver=3, via=urls[2], hops=b"10+" + b"L" * 50),
    "segment_legacy": queue(urls[0], 0, 1),
    "segment_empty": segment([]),
    "segment_one": segment([queue(urls[0])]),
    "segment_mixed": segment([queue(u, i, i) for i, u in enumerate(urls)] + [queue(urls[0], ver=1)]),
    "segment_many": segment([queue(b"http://h/%d" % i, 0, i % 5) for i in range(40)]),
    "segment_v3": segment([queue(u, i, i, ver=3, via=urls[0], hops=b"L" * i) for i, u in enumerate(urls)]),
    "intake_empty": intake([]),
    "intake_two": intake([(3, 7, queue(urls[0])), (4, 0, b"")]),
    "intake_many": intake([(i % 3, i, queue(b"http://h/%d" % i)) for i in range(20)]),
    "bucket_empty": bucket([]),
    "bucket_small": bucket([0, 5, 10, 95, 1000, 2**127]),
    "bucket_hashes": bucket(sorted({int.from_bytes(hashlib.sha256(b"%d" % i).digest()[:16], "big") for i in range(64)})),
    "bucket_unsorted": bucket([9, 3, 3, 2**128 - 1]),
    "drop_robots": drop(1, 5, b"Disallow: /x", b"http://a/x"),
    "drop_gaveup": drop(3, 2**64 - 1, b"", urls[2]),
    "drop_delay": drop(2, 0, "d\u00e9lai".encode(), b""),
    "drop_v2": drop(1, 5, b"Disallow: /x", b"http://a/x", (2, b"LR", b"http://a/")),
    "drop_v2_seed": drop(3, 9, b"5 attempts", urls[1], (0, b"", b"")),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {out}")
