#!/usr/bin/env bash
# Tests the Debian package on this machine, as root (CI runs it from .ci/run): builds it
# (deploy/deb/build.sh) unless a .deb is given, lints it with lintian (no errors), installs
# it with dpkg -i, checks what it put where, runs `systemd-analyze verify` on the installed
# unit, runs the installed binary as the frontierd user with the installed configuration
# (plus [addresses] allow for loopback and a [resolve] name) against a loopback test site
# (python3 http.server on 127.0.0.1, a free port) and checks that the WARC file and the crawl
# log land in /var/lib/frontierd, then dpkg -r (state and conffile kept) and dpkg -P (state,
# conffile and enablement gone). Where PID 1 is systemd it also starts the service with
# systemctl; where it is not, it says what it could not start and tests the rest.
# All traffic stays on 127.0.0.1.
#
#   deploy/deb/test.sh [FILE.deb]
#
# It installs and purges the package frontierd: it refuses to run where frontierd is already
# installed (a crawl would be purged), unless CI is set (CI machines are disposable).
set -euo pipefail
cd "$(dirname "$0")/../.."

# dpkg's standard error, less deb-systemd-helper's notes on the links it makes and removes
# and systemd-sysusers' on the user and group it creates (a machine that never had the
# package): anything left is an error of a maintainer script.
dpkg_errors() {
  grep -v -e '^Created symlink ' -e '^Removed "\?/etc/systemd/' \
    -e "^Creating group 'frontierd' with GID [0-9]*\.\$" \
    -e "^Creating user 'frontierd' (.*) with UID [0-9]* and GID [0-9]*\.\$" "$1" || true
}

fail() {
  echo "deb test: FAIL: $*" >&2
  exit 1
}
step() { echo "== deb: $*"; }

[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, the frontierd user)"
for tool in lintian dpkg systemd-analyze systemd-sysusers systemd-tmpfiles setpriv python3; do
  command -v "$tool" >/dev/null || fail "$tool missing (apt-get install lintian systemd util-linux python3)"
done

if dpkg-query -W -f='${Status}' frontierd 2>/dev/null | grep -qv "not-installed"; then
  [ -n "${CI:-}" ] || fail "the package frontierd is installed here; this test would purge it (set CI=1 to allow)"
  step "purging the frontierd left by an earlier run"
  dpkg -P frontierd
fi

work=$(mktemp -d /tmp/frontierd-deb-test.XXXXXX)
server_pid=
daemon_pid=
installed_here=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  # a failed run leaves behind no package it installed
  if [ -n "$installed_here" ] && dpkg-query -W -f='${Status}' frontierd 2>/dev/null | grep -qv "not-installed"; then
    dpkg -P frontierd >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ $# -ge 1 ]; then
  deb=$1
else
  step "build (deploy/deb/build.sh)"
  deb=$(deploy/deb/build.sh | tail -n 1)
fi
[ -f "$deb" ] || fail "no package at $deb"
echo "package: $deb"
dpkg-deb --info "$deb"
dpkg-deb --contents "$deb"

step "maintainer scripts"
dpkg-deb -e "$deb" "$work/control"
for script in "$work"/control/{preinst,postinst,prerm,postrm}; do
  [ -f "$script" ] || continue
  sh -n "$script" || fail "$(basename "$script") is not valid sh"
  ! grep -q "#DEBHELPER#" "$script" || fail "$(basename "$script") still has #DEBHELPER#"
done
grep -q 'rm -rf /var/lib/frontierd' "$work/control/postrm" || fail "postrm does not remove the state on purge"

step "lintian"
# --fail-on error: any error tag fails the test; warnings and info are printed, not fatal.
# Lintian warns when run as root; the package is only read.
lintian_rc=0
lintian --fail-on error --info --display-info "$deb" >"$work/lintian.txt" 2>&1 || lintian_rc=$?
grep -v "running with root privileges" "$work/lintian.txt" || echo "(lintian: no tags)"
[ "$lintian_rc" = 0 ] || fail "lintian exit status $lintian_rc (errors above)"

step "dpkg -i"
installed_here=1
dpkg -i "$deb" 2>"$work/dpkg.err" || fail "dpkg -i failed: $(cat "$work/dpkg.err")"
[ -z "$(dpkg_errors "$work/dpkg.err")" ] || fail "dpkg -i printed errors: $(cat "$work/dpkg.err")"
[ -x /usr/bin/frontierd ] || fail "/usr/bin/frontierd missing"
/usr/bin/frontierd --version
getent passwd frontierd >/dev/null || fail "no frontierd user after install (sysusers)"
echo "user: $(getent passwd frontierd)"
dpkg-query -W -f='${Conffiles}\n' frontierd | grep -q "/etc/frontierd/frontierd.toml" ||
  fail "/etc/frontierd/frontierd.toml is not a conffile"
grep -qx 'data_dir = "/var/lib/frontierd"' /etc/frontierd/frontierd.toml ||
  fail "the installed configuration does not put data_dir under /var/lib/frontierd"
/usr/bin/frontierd config check /etc/frontierd/frontierd.toml
unit=/usr/lib/systemd/system/frontierd.service
cmp "$unit" deploy/frontierd.service || fail "the installed unit differs from deploy/frontierd.service"
grep -qx "Type=notify" "$unit" || fail "the unit is not Type=notify"
grep -qx "ExecStart=/usr/bin/frontierd run --config /etc/frontierd/frontierd.toml" "$unit" ||
  fail "the unit does not run the installed config"
for f in /usr/lib/sysusers.d/frontierd.conf /usr/lib/tmpfiles.d/frontierd.conf \
  /usr/share/man/man1/frontierd.1.gz /usr/share/man/man1/frontierd-run.1.gz \
  /usr/share/man/man1/frontierd-robots-check.1.gz \
  /usr/share/bash-completion/completions/frontierd /usr/share/zsh/vendor-completions/_frontierd \
  /usr/share/fish/vendor_completions.d/frontierd.fish /usr/share/doc/frontierd/copyright \
  /usr/share/doc/frontierd/crates-licences.txt /usr/share/doc/frontierd/changelog.Debian.gz; do
  [ -f "$f" ] || fail "$f missing"
done
zcat /usr/share/man/man1/frontierd.1.gz >"$work/frontierd.1"
grep -q '^\.TH frontierd 1' "$work/frontierd.1" || fail "frontierd(1) is not a manual page"
bash -c '. /usr/share/bash-completion/completions/frontierd && complete -p frontierd' >/dev/null ||
  fail "the bash completion does not load"
# dh_installsystemd's enable: the [Install] symlink, made whether or not systemd runs
[ -L /etc/systemd/system/multi-user.target.wants/frontierd.service ] ||
  fail "frontierd.service not enabled (no multi-user.target.wants link)"

step "systemd-analyze verify $unit"
printed=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify failed: $printed"
[ -z "$printed" ] || fail "systemd-analyze verify printed: $printed"

pid1=$(ps -p 1 -o comm=)
if [ "$pid1" = systemd ]; then
  step "PID 1 is systemd: systemctl start frontierd"
  systemctl is-enabled frontierd
  systemctl start frontierd
  systemctl is-active --quiet frontierd || fail "frontierd.service did not start: $(systemctl status frontierd 2>&1)"
  addr=$(cat /var/lib/frontierd/admin.addr)
  python3 -c "import sys, urllib.request; urllib.request.urlopen('http://$addr/healthz', timeout=5)" ||
    fail "the service's /healthz did not answer"
  systemctl stop frontierd
else
  step "PID 1 is '$pid1', not systemd: not tested here"
  echo "  - systemctl start/stop frontierd (the Type=notify start-up, the watchdog, the sandbox"
  echo "    of the unit's hardening, StateDirectory=) and systemctl is-enabled: no systemd to ask;"
  echo "  - postinst's systemd-tmpfiles --create (dh_installsystemd runs it only where systemd"
  echo "    runs): run below by hand, as systemd-tmpfiles-setup.service does at boot."
  echo "  Tested instead: the unit with systemd-analyze verify, its enablement link, and the"
  echo "  daemon run as the frontierd user with the installed configuration."
fi

step "state directory (tmpfiles.d)"
if [ ! -d /var/lib/frontierd ]; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/frontierd.conf
fi
[ "$(stat -c '%U:%G %a' /var/lib/frontierd)" = "frontierd:frontierd 750" ] ||
  fail "/var/lib/frontierd is $(stat -c '%U:%G %a' /var/lib/frontierd), not frontierd:frontierd 750"

step "a crawl of a loopback site as the frontierd user"
chmod 755 "$work"
mkdir "$work/site"
printf 'User-agent: *\nAllow: /\n' >"$work/site/robots.txt"
printf '<html><body><a href="/a.html">a</a> <a href="/b.html">b</a></body></html>\n' >"$work/site/index.html"
printf '<html><body>page a</body></html>\n' >"$work/site/a.html"
printf '<html><body>page b</body></html>\n' >"$work/site/b.html"
python3 - "$work/site" "$work/port" >"$work/site.log" 2>&1 <<'PY' &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PY
server_pid=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port") || fail "the test site did not start: $(cat "$work/site.log")"
echo "test site: http://127.0.0.1:$port/ (as http://site.test:$port/)"

# The installed configuration with what this test needs: loopback allowed, site.test
# resolved to 127.0.0.1 ([resolve] is the file's last table), the admin API on a free port.
sed -e 's|^allow = \[\]$|allow = ["127.0.0.0/8"]|' \
  -e 's|^listen = "127.0.0.1:8470"$|listen = "127.0.0.1:0"|' \
  /etc/frontierd/frontierd.toml >"$work/frontierd.toml"
printf '"site.test" = ["127.0.0.1"]\n' >>"$work/frontierd.toml"
grep -q '^allow = \["127.0.0.0/8"\]' "$work/frontierd.toml" || fail "could not set [addresses] allow"
printf 'http://site.test:%s/\nhttp://site.test:%s/a.html\nhttp://site.test:%s/b.html\n' \
  "$port" "$port" "$port" >"$work/seeds.txt"
chmod 644 "$work/frontierd.toml" "$work/seeds.txt"
/usr/bin/frontierd config check "$work/frontierd.toml"

setpriv --reuid=frontierd --regid=frontierd --init-groups \
  /usr/bin/frontierd run --config "$work/frontierd.toml" --seeds "$work/seeds.txt" \
  >"$work/daemon.log" 2>&1 &
daemon_pid=$!
log=/var/lib/frontierd/crawl.log.jsonl
for _ in $(seq 60); do
  [ -f "$log" ] && [ "$(grep -c '"status":200' "$log" 2>/dev/null || true)" -ge 3 ] && break
  kill -0 "$daemon_pid" 2>/dev/null || fail "the daemon exited: $(cat "$work/daemon.log")"
  sleep 0.5
done
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "the daemon did not stop cleanly on SIGTERM: $(tail -20 "$work/daemon.log")"
daemon_pid=
tail -5 "$work/daemon.log"

[ -f "$log" ] || fail "no crawl log at $log: $(tail -20 "$work/daemon.log")"
cat "$log"
for path in / /a.html /b.html; do
  grep -q "\"url\":\"http://site.test:$port$path\"" "$log" || fail "$path not in the crawl log"
done
[ "$(grep -c '"status":200' "$log")" -ge 3 ] || fail "fewer than 3 pages fetched with 200"
shopt -s nullglob
warcs=(/var/lib/frontierd/warc/*.warc.gz)
[ "${#warcs[@]}" -ge 1 ] || fail "no WARC file under /var/lib/frontierd/warc"
for w in "${warcs[@]}"; do
  gzip -t "$w" || fail "$w is not valid gzip"
  [ "$(stat -c %U "$w")" = frontierd ] || fail "$w is not the frontierd user's"
done
# (to a file first: grep -q stopping early would make zcat fail on the pipe, with pipefail)
zcat "${warcs[@]}" >"$work/warc.txt"
grep -q "WARC-Target-URI: http://site.test:$port/a.html" "$work/warc.txt" ||
  fail "page a is not in the WARC files"
[ "$(stat -c %U "$log")" = frontierd ] || fail "the crawl log is not the frontierd user's"
ls -l /var/lib/frontierd /var/lib/frontierd/warc

step "dpkg -r (state and configuration kept)"
dpkg -r frontierd 2>"$work/dpkg.err" || fail "dpkg -r failed: $(cat "$work/dpkg.err")"
[ -z "$(dpkg_errors "$work/dpkg.err")" ] || fail "dpkg -r printed errors: $(cat "$work/dpkg.err")"
[ ! -e /usr/bin/frontierd ] || fail "/usr/bin/frontierd left after dpkg -r"
dpkg-query -W -f='${Status}\n' frontierd | grep -q "config-files" || fail "not in config-files state after dpkg -r"
[ -f "$log" ] && [ -f "${warcs[0]}" ] || fail "dpkg -r removed the crawl (/var/lib/frontierd)"
[ -f /etc/frontierd/frontierd.toml ] || fail "dpkg -r removed the conffile"

step "dpkg -P (state, configuration and enablement removed)"
dpkg -P frontierd 2>"$work/dpkg.err" || fail "dpkg -P failed: $(cat "$work/dpkg.err")"
[ -z "$(dpkg_errors "$work/dpkg.err")" ] || fail "dpkg -P printed errors: $(cat "$work/dpkg.err")"
[ ! -e /var/lib/frontierd ] || fail "/var/lib/frontierd left after dpkg -P"
[ ! -e /etc/frontierd ] || fail "/etc/frontierd left after dpkg -P"
[ ! -e /etc/systemd/system/multi-user.target.wants/frontierd.service ] ||
  fail "the enablement link is left after dpkg -P"
if dpkg-query -W -f='${Status}' frontierd 2>/dev/null | grep -qv "not-installed"; then
  fail "frontierd still known to dpkg after dpkg -P"
fi
# Debian keeps system users on purge (their uid may still own files); so does this package.
getent passwd frontierd >/dev/null && echo "the frontierd system user is kept, as Debian does"

echo "deb test: ok"
