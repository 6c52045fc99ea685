#!/usr/bin/env bash
# Lua's source from Debian's source package lua5.4 (the version liblua5.4-dev is built from), for
# the ASan+UBSan generator: build.ninja compiles it instrumented, since the system library is not
# and ASan would not see the generator's misuse of Lua's memory (a stack write past its end, say).
# The machine's own APT sources, as source entries, in a private list folder: the system's APT
# configuration is left alone. Usage: tools/fetch_lua.sh DIR (does nothing when DIR has it).
set -eu
dir=$1
[ -f "$dir/src/lapi.c" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/parts"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" > "$tmp/parts/$(basename "$f")"
done
if [ -f /etc/apt/sources.list ]; then
  sed -n 's/^deb \(.*\)$/deb-src \1/p' /etc/apt/sources.list > "$tmp/parts/src.list"
fi
o=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" -o Dir::State::Lists="$tmp/lists"
   -o APT::Sandbox::User=root)
apt-get "${o[@]}" update -qq
(cd "$tmp" && apt-get "${o[@]}" source --download-only -qq lua5.4 >/dev/null)
mkdir -p "$dir"
tar -xzf "$tmp"/lua5.4_*.orig.tar.gz -C "$dir" --strip-components=1
if [ ! -f "$dir/src/lapi.c" ]; then
  echo "fetch_lua: Debian's lua5.4 source package has no src/lapi.c" >&2
  exit 1
fi
