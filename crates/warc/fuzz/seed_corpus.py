#!/usr/bin/env python3
"""Writes corpus/recover: four inputs for the target to mutate (byte 0: the number of
whole members in its low two bits; the rest cut into that many parts and a raw tail)."""
import gzip
import os

MEMBER = gzip.compress(b"WARC/1.1\r\nWARC-Type: request\r\n\r\n" * 20)
SEEDS = {
    "one": b"\x01hello world",
    "three-and-tail": b"\x03<WARC/1.1 record one><WARC/1.1 record two><WARC/1.1 record 3>"
                      b"\x1f\x8b\x08\x00junk",
    "none": b"\x00\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
    "cut-member": b"\x02" + b"x" * 30 + MEMBER[: len(MEMBER) // 2],
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "recover")
os.makedirs(out, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {out}")
