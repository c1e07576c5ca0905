"""The url-frontier (and frontierd.v1) Python stubs, generated at test time from the
repository's .proto files and made importable. Shared by the e2e clients in this folder."""

import os
import subprocess
import sys


def generate(proto_dir, gen_dir):
    os.makedirs(gen_dir, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir,
         "--python_out=" + gen_dir, "--grpc_python_out=" + gen_dir,
         "urlfrontier.proto", "frontierd.proto"],
        check=True)
    sys.path.insert(0, gen_dir)
