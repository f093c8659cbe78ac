#!/usr/bin/env bash
# `luarocks make` into a temporary tree, then require "weft" from a stock
# luajit that knows nothing of the build tree.
set -euo pipefail
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
unset WEFT_LIB WEFT_LUA_DIR
luarocks --lua-version 5.1 --tree "$tree" make rockspec/weft-scm-1.rockspec
rm -rf build.luarocks
eval "$(luarocks --lua-version 5.1 --tree "$tree" path)"
cd "$tree"
luajit -e '
local weft = require "weft"
assert(weft.version:match("^%d+%.%d+%.%d+$"), "version")
assert(require("weft") == weft, "require twice")
local libpath = require("weft.internal").libpath
assert(libpath and libpath:find(os.getenv("PWD"), 1, true), "library from the tree: " .. tostring(libpath))
local a = weft.zeros(4)
assert(#a == 4 and a[3] == 0)
print("ok: weft " .. weft.version .. " from " .. libpath)
'
