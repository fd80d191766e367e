#!/usr/bin/env bash
# Rebuild the embedded sample corpus: figures (Pillow) + LaTeXML HTML.
#
#   bash samples/build_samples.sh            # all papers
#   bash samples/build_samples.sh 2511.99003 # only the named stems
#
# Needs: latexmlc (Perl LaTeXML 0.8.7, Debian package `latexml`), ImageMagick's
# Perl binding + ghostscript (only for the PDF figure of 2511.99003), and a
# Python with Pillow ($PYTHON, default /work/venv/bin/python, else python3).
#
# Output: samples/html/<stem>/<stem>.html with the images LaTeXML copies
# (figs/*.png, same relative path as in the TeX source) or converts (x1.png)
# next to it.  The HTML is LaTeXML's output untouched.  Byproducts
# (LaTeXML.cache, logs) are removed; no CSS is written (--nodefaultresources).
# SOURCE_DATE_EPOCH keeps ImageMagick from stamping dates into converted PNGs;
# as a safety net for ImageMagick builds that ignore it, any tIME chunk and
# date:* text chunk in the output PNGs is dropped (pixel data untouched), so
# rebuilds are byte-identical.  The HTML itself is never modified.
set -euo pipefail

SAMPLES="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-/work/venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"

command -v latexmlc >/dev/null || { echo "latexmlc not found (apt-get install latexml)" >&2; exit 1; }

# ImageMagick's system policy forbids reading PDF; a private policy under
# XDG_CONFIG_HOME re-allows *reading* it (nothing in /etc is touched).
export XDG_CONFIG_HOME="$SAMPLES/.imagemagick"
# Deterministic \today and no date chunks in ImageMagick's PNGs.
export SOURCE_DATE_EPOCH=1762128000   # 2025-11-03T00:00:00Z

echo "== figures"
"$PYTHON" "$SAMPLES/make_figures.py"

if [ "$#" -gt 0 ]; then
  stems=("$@")
else
  stems=()
  for d in "$SAMPLES"/tex/*/; do stems+=("$(basename "$d")"); done
fi

logdir="$(mktemp -d)"
trap 'rm -rf "$logdir"' EXIT

for stem in "${stems[@]}"; do
  src="$SAMPLES/tex/$stem"
  out="$SAMPLES/html/$stem"
  [ -f "$src/main.tex" ] || { echo "no $src/main.tex" >&2; exit 1; }
  echo "== $stem"
  rm -rf "$out"
  mkdir -p "$out"
  status=0
  (
    cd "$src"
    latexmlc \
      --preload='[ids]latexml.sty' \
      --format=html5 --pmml --cmml --mathtex \
      --nodefaultresources --timestamp=0 \
      --path="$src" \
      --log="$logdir/$stem.log" \
      --dest="$out/$stem.html" \
      main.tex
  ) >"$logdir/$stem.out" 2>&1 || status=$?
  grep -E '^(Warning|Error|Fatal):' "$logdir/$stem.log" | sed 's/^/   /' || true
  grep -E '^(Conversion|Post-processing) complete' "$logdir/$stem.log" | sed 's/^/   /' || true
  if [ "$status" -ne 0 ] || [ ! -s "$out/$stem.html" ]; then
    echo "latexmlc failed for $stem (exit $status); log:" >&2
    cat "$logdir/$stem.log" >&2
    exit 1
  fi
  rm -f "$out/LaTeXML.cache" "$out"/*.css "$out"/*.log
done

echo "== strip ImageMagick timestamps from converted PNGs"
"$PYTHON" - "$SAMPLES/html" <<'PY'
import struct, sys, zlib
from pathlib import Path

def strip(path: Path) -> bool:
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    out, i, changed = [data[:8]], 8, False
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        ctype = data[i + 4:i + 8]
        chunk = data[i:i + 12 + n]
        body = data[i + 8:i + 8 + n]
        drop = ctype == b"tIME" or (ctype == b"tEXt" and body.split(b"\0", 1)[0].startswith(b"date:"))
        if drop:
            changed = True
        else:
            out.append(chunk)
        i += 12 + n
    if changed:
        path.write_bytes(b"".join(out))
    return changed

for p in sorted(Path(sys.argv[1]).rglob("*.png")):
    if strip(p):
        print("   stripped", p.relative_to(Path(sys.argv[1]).parent))
PY

echo "== done"
du -sh "$SAMPLES" 2>/dev/null | sed 's/^/   samples total: /'
