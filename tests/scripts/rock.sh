#!/usr/bin/env bash
# The README's luarocks command, exactly as written, into a temporary tree
# (HOME is a temporary directory, so --local installs there), then
# require "weft" from a stock luajit that knows nothing of the build tree.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
home=$(mktemp -d)
trap 'rm -rf "$home"; rm -rf "$ROOT/build.luarocks"' EXIT
unset WEFT_LIB WEFT_LUA_DIR
cmd=$(grep -E '^luarocks .* make rockspec/' "$ROOT/README.md" | head -n 1)
[ -n "$cmd" ] || { echo "FAIL: no luarocks command in the README"; exit 1; }
path_cmd=$(grep -E '^eval "\$\(luarocks .* path\)"' "$ROOT/README.md" | head -n 1)
[ -n "$path_cmd" ] || { echo "FAIL: no luarocks path command in the README"; exit 1; }
cd "$ROOT"
echo "README: $cmd"
HOME="$home" bash -c "$cmd"
export HOME="$home"
eval "$path_cmd"
cd "$home"
luajit -e '
local weft = require "weft"
assert(weft.version:match("^%d+%.%d+%.%d+$"), "version")
assert(require("weft") == weft, "require twice")
local libpath = require("weft.internal").libpath
assert(libpath and libpath:find(os.getenv("HOME"), 1, true), "library from the tree: " .. tostring(libpath))
local a = weft.zeros(4)
assert(#a == 4 and a[3] == 0)
print("ok: weft " .. weft.version .. " from " .. libpath)
'
