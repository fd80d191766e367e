#!/usr/bin/env bash
# Rebuild the test pages of tests/pages/: TeX written for the tests -> LaTeXML HTML.
#
#   bash tests/pages/build_pages.sh           # every page
#   bash tests/pages/build_pages.sh multi     # only the named ones
#
# Needs latexmlc (Debian package `latexml`, LaTeXML 0.8.7, the engine family of ar5iv)
# and a Python with Pillow ($PYTHON, default python3) for the small placeholder images.
# Output: tests/pages/html/<name>.html, LaTeXML's output untouched (the copied images are
# not kept: the tests read the HTML only). Rebuilds are byte-identical.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
command -v latexmlc >/dev/null || { echo "latexmlc not found (apt-get install latexml)" >&2; exit 1; }
export SOURCE_DATE_EPOCH=1762128000

if [ "$#" -gt 0 ]; then names=("$@"); else names=(); for d in "$HERE"/tex/*/; do names+=("$(basename "$d")"); done; fi
mkdir -p "$HERE/html"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for name in "${names[@]}"; do
  echo "== $name"
  cp -r "$HERE/tex/$name" "$work/$name"
  mkdir -p "$work/$name/figs"
  "$PYTHON" - "$work/$name/figs" <<'PY'
import sys
from PIL import Image, ImageDraw
for k, (name, size) in enumerate([("plot_a", (240, 160)), ("plot_b", (240, 160)), ("plot_c", (240, 160)),
                                  ("plot_d", (240, 160)), ("strip_a", (480, 120)), ("strip_b", (480, 120))]
                                 + [(f"panel_{c}", (160, 120)) for c in "abcdefgh"]):
    im = Image.new("RGB", size, "white")
    ImageDraw.Draw(im).rectangle([10, 10, size[0] - 10, size[1] - 10], outline=((40 * k) % 256, 80, 160), width=3)
    im.save(f"{sys.argv[1]}/{name}.png", optimize=True)
PY
  (cd "$work/$name" && latexmlc --preload='[ids]latexml.sty' --format=html5 --nodefaultresources --timestamp=0 \
      --log="$work/$name.log" --dest="$work/out/$name.html" main.tex) >"$work/$name.out" 2>&1 \
    || { cat "$work/$name.log" >&2; exit 1; }
  grep -E '^(Conversion|Post-processing) complete' "$work/$name.log" | sed 's/^/   /' || true
  cp "$work/out/$name.html" "$HERE/html/$name.html"
done
