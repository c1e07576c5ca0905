#!/usr/bin/env bash
# Builds the Debian package of frontierd: target/debian/frontierd_<version>-1_<arch>.deb
# (the path is printed last). Needs cargo and cargo-deb (cargo install cargo-deb --locked),
# and dpkg-dev + binutils (build-essential) for the shared-library dependencies and stripping.
#
#   deploy/deb/build.sh
#
# 1. cargo build --release --locked -p frontierd
# 2. the files generated for the package, into <target dir>/release/deb-assets/ (where
#    [package.metadata.deb] assets in crates/frontierd/Cargo.toml read them):
#    - man/: frontierd.1.gz and one page per subcommand (frontierd generate-man, clap_mangen)
#    - completions/: bash, zsh, fish (frontierd generate-completions, clap_complete)
#    - frontierd.toml: the conffile, configs/frontierd.toml (the documented defaults) with
#      [store] data_dir = "/var/lib/frontierd", checked with `frontierd config check`
#    - crates-licences.txt: every crate linked into the binary with its licence (cargo tree)
# 3. cargo deb --no-build: the unit, sysusers and tmpfiles entries from deploy/, the
#    maintainer scripts, copyright and changelog from deploy/deb/.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_INCREMENTAL=0

command -v cargo-deb >/dev/null || {
  echo "cargo-deb missing: cargo install cargo-deb --locked" >&2
  exit 1
}

cargo build --release --locked -p frontierd
read -r target_dir version < <(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys
m = json.load(sys.stdin)
print(m["target_directory"], next(p["version"] for p in m["packages"] if p["name"] == "frontierd"))')
bin="$target_dir/release/frontierd"
assets="$target_dir/release/deb-assets"
rm -rf "$assets"
mkdir -p "$assets"

"$bin" generate-man "$assets/man" >/dev/null
# Debian policy 12.1: manual pages compressed with gzip -9n (cargo-deb compresses only the
# pages it does not count as build products, and everything under target/ counts as one).
gzip -9n "$assets"/man/*.1
"$bin" generate-completions "$assets/completions" >/dev/null

# The conffile: the documented defaults, the data directory spelled out so that the daemon
# run by hand (`sudo -u frontierd frontierd run --config /etc/frontierd/frontierd.toml`)
# writes where the unit's StateDirectory=frontierd ($STATE_DIRECTORY) does.
python3 - configs/frontierd.toml "$assets/frontierd.toml" <<'PY'
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
replacements = [
    (
        "# change. This exact file is embedded in the binary: `frontierd run` without --config uses it.\n",
        "# change. Installed by the Debian package as /etc/frontierd/frontierd.toml, a conffile (your\n"
        "# edits are kept on upgrade), which frontierd.service runs with. `frontierd config default`\n"
        "# prints the defaults embedded in the binary: this file with data_dir empty.\n",
    ),
    (
        "# Where everything lives. Empty: $STATE_DIRECTORY (systemd) or ./frontierd-data.\n"
        'data_dir = ""\n',
        "# Where everything lives. Empty: $STATE_DIRECTORY (systemd) or ./frontierd-data. The\n"
        "# package's: the unit's StateDirectory, owned by the frontierd user (tmpfiles.d).\n"
        'data_dir = "/var/lib/frontierd"\n',
    ),
]
for old, new in replacements:
    if text.count(old) != 1:
        sys.exit(f"configs/frontierd.toml changed: expected once:\n{old}")
    text = text.replace(old, new)
open(dst, "w").write(text)
PY
"$bin" config check "$assets/frontierd.toml" >/dev/null

# Every crate compiled into the binary (normal dependencies of frontierd on this platform).
{
  echo "Crates linked statically into /usr/bin/frontierd, with their licences (cargo tree)."
  echo
  cargo tree --locked -p frontierd -e normal --prefix none --format '{p} {l}' |
    sed 's/ (\*)$//; s/ (proc-macro)//' | sort -u
} >"$assets/crates-licences.txt"

# --strip: the release profile keeps line tables (debug = 1) for backtraces and profiles;
# Debian policy 10.1 wants the installed binary stripped (lintian: unstripped-binary-or-object).
cargo deb -p frontierd --no-build --strip >&2
deb="$target_dir/debian/frontierd_${version}-1_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || { echo "cargo deb made no $deb" >&2; exit 1; }
echo "$deb"
