"""PutURLs and GetURLs throughput of a running frontierd from a Python (grpcio) client with
stubs generated from crates/grpc/proto (bench/grpc-bench.sh runs it).

Usage: urlfrontier_bench.py PROTO_DIR GEN_DIR ADDR URLS HOSTS BASE   (BASE: http://h{}.x:P)
"""

import json
import os
import subprocess
import sys
import time

proto_dir, gen_dir, addr, n, hosts, base = sys.argv[1:7]
n, hosts = int(n), int(hosts)
os.makedirs(gen_dir, exist_ok=True)
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir,
                "--python_out=" + gen_dir, "--grpc_python_out=" + gen_dir,
                "urlfrontier.proto"], check=True)
sys.path.insert(0, gen_dir)
import grpc  # noqa: E402
import urlfrontier_pb2 as pb  # noqa: E402
import urlfrontier_pb2_grpc as pbg  # noqa: E402

f = pbg.URLFrontierStub(grpc.insecure_channel(addr, options=[
    ("grpc.max_receive_message_length", 64 << 20)]))
urls = [base.replace("{}", str(i % hosts)) + "/p/%d" % i for i in range(n)]

t = time.monotonic()
acks = list(f.PutURLs(pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u)))
                      for u in urls))
put_secs = time.monotonic() - t
assert len(acks) == n and all(a.status == pb.AckMessage.OK for a in acks), acks[:3]

t = time.monotonic()
done = 0
deadline = time.monotonic() + 600
while done < n and time.monotonic() < deadline:
    got = list(f.GetURLs(pb.GetParams(delay_requestable=600)))
    if not got:
        time.sleep(0.005)
        continue
    acks = list(f.PutURLs(iter([pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=i.url)))
                               for i in got])))
    done += len(acks)
get_secs = time.monotonic() - t
print(json.dumps({"client": "python", "urls": n, "put_secs": round(put_secs, 3),
                  "put_urls_per_sec": round(n / put_secs),
                  "served_and_reported": done, "get_secs": round(get_secs, 3),
                  "get_report_urls_per_sec": round(done / get_secs)}))
