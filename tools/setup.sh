#!/usr/bin/env bash
# Installs what dsagen needs on a Debian machine (as root), once: compiler, ninja, Lua 5.4,
# Penlight, OpenSSL's libcrypto (SHA-256 for provenance hashes).
set -eu
need=()
for p in gcc ninja-build liblua5.4-dev lua-penlight libssl-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
