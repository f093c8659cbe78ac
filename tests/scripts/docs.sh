#!/usr/bin/env bash
# make docs builds the reference as one HTML page: it is well formed (every
# tag closed in order) and every link inside it reaches an anchor; where
# Chromium is installed (make docs-shot installs it), a headless screenshot
# of the page is not blank (a blank one is about 8 KB, the page 200+ KB).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cd "$ROOT"
make -s docs BUILD="$out" >"$out/log"
cat "$out/log"
grep -qE "^docs: 11 pages -> " "$out/log"
python3 - "$out/docs/index.html" <<'PY'
import html.parser, sys

class Check(html.parser.HTMLParser):
    VOID = {"meta", "br", "hr", "img"}

    def __init__(self):
        super().__init__()
        self.stack, self.ids, self.hrefs, self.bad = [], set(), [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.hrefs.append(a["href"][1:])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.bad.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else ""))
        else:
            self.stack.pop()

c = Check()
c.feed(open(sys.argv[1], encoding="utf-8").read())
broken = [h for h in c.hrefs if h not in c.ids]
if c.bad or c.stack or broken:
    print("FAIL: tags %s, unclosed %s, links to nowhere %s" % (c.bad[:5], c.stack, broken))
    sys.exit(1)
print("docs: well formed, %d ids, %d internal links" % (len(c.ids), len(c.hrefs)))
PY
if command -v chromium >/dev/null; then
  timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 \
    --screenshot="$out/shot.png" "file://$out/docs/index.html" >/dev/null 2>&1
  size=$(stat -c %s "$out/shot.png")
  echo "docs: Chromium's screenshot of the page: $size bytes"
  [ "$size" -gt 60000 ] || { echo "FAIL: the screenshot looks blank"; exit 1; }
else
  echo "docs: no chromium here: no screenshot (make docs-shot installs it)"
fi
