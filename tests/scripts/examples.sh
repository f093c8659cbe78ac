#!/usr/bin/env bash
# The examples run and print what they promise.
set -euo pipefail
"$BUILD/embed" | grep -q "embed: ok"
"$BUILD/weft" examples/hello.lua
echo ok
