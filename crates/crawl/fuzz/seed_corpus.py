#!/usr/bin/env python3
"""Writes corpus/fetched_inputs: well-formed inputs for the target to mutate (a knobs byte,
then the body; its first line is also the X-Robots-Tag value and the datetime)."""
import gzip
import os

URLSET = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
          b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
          b'<url><loc>http://a.test/p1</loc><lastmod>2024-01-01T10:00:00+02:00</lastmod>'
          b'<changefreq>daily</changefreq><priority>0.8</priority></url>\n'
          b'<url><loc>http://a.test/p2?x=1&amp;y=2</loc></url>\n</urlset>\n')
INDEX = (b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
         b'<sitemap><loc>http://a.test/s1.xml.gz</loc><lastmod>2024-02-03</lastmod></sitemap>'
         b'</sitemapindex>')
PAGE = (b'<!DOCTYPE html><html><head><base href="/base/">'
        b'<meta name="robots" content="noarchive"><meta name="frontierd" content="nofollow">'
        b'</head><body><a href="x">x</a><a href="http://b.test/y#frag" rel="nofollow">y</a>'
        b'<area href="//c.test/z"><frame src="f.html"><iframe src="javascript:alert(1)"></iframe>'
        b'<a href="mailto:a@b">m</a><a href="https://d.test:8443/%7Ea?b=c">d</a></body></html>')
SEEDS = {
    "urlset": b"\x35" + URLSET,
    "index": b"\x13" + INDEX,
    "urlset-gz": b"\x7f" + gzip.compress(URLSET),
    "page": b"\x0f" + PAGE,
    "page-nofollow-kept": b"\x8f" + PAGE,
    "header": b"\x0a" + b"googlebot: noindex, frontierd: nofollow, unavailable_after: 2030-01-01\n" + PAGE,
    "datetime": b"\x21" + b"2024-01-01T10:00:00.5+02:00\n" + URLSET,
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fetched_inputs")
os.makedirs(out, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {out}")
