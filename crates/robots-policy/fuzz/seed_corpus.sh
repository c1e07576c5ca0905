#!/usr/bin/env bash
# Seed fuzz/corpus/{parse,differential} from the shared robots.txt corpus (not committed).
#   bash seed_corpus.sh [CORPUS_DIR]      default: ../../../../shared/corpus/robots
# Each file is copied as is (a plain body), and again as `body NUL agent NUL url NUL url`
# with a few agents and URLs from the corpus's own gen_urls.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../../shared/corpus/robots}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$here/corpus/parse" "$here/corpus/differential" "$here/corpus/state_decode"
cp "$src"/*.txt "$tmp/"
rm -f "$tmp/synthetic.txt"  # 500 KiB: too big to mutate usefully; the real files suffice
python3 "$src/gen_urls.py" "$tmp" "$tmp/urls" 40 >/dev/null
python3 - "$tmp" "$here/corpus" <<'PY'
import os, sys
tmp, out = sys.argv[1], sys.argv[2]
agents = [b"googlebot", b"Bingbot", b"*", b"FooBot"]
for name in sorted(os.listdir(tmp)):
    if not name.endswith(".txt"):
        continue
    body = open(os.path.join(tmp, name), "rb").read()
    urls = open(os.path.join(tmp, "urls", name[:-4] + ".urls"), "rb").read().split(b"\n")
    urls = [u for u in urls if u]
    for d in ("parse", "differential"):
        open(os.path.join(out, d, name), "wb").write(body)
    for i, agent in enumerate(agents):
        chunk = urls[i * 4:(i + 1) * 4]
        for d, cap in (("parse", None), ("differential", 4096)):
            b = body if cap is None else body[:cap]
            data = b + b"\0" + agent + b"\0" + b"\0".join(chunk)
            open(os.path.join(out, d, "%s-%d" % (name[:-4], i)), "wb").write(data)
PY
ls "$here/corpus/parse" | wc -l
