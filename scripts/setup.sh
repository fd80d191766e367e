#!/usr/bin/env bash
# Set up a machine for sciga-builder from this checkout:
#  - system tools the TeX-source stage uses (poppler, ghostscript), our own LaTeXML
#    conversion uses (latexml, ImageMagick), and the headless browser the `sciga browse`
#    tests drive (Debian's chromium), when apt is available;
#  - a user-level ImageMagick policy that lets LaTeXML turn PDF/EPS figures into PNGs
#    (Debian's /etc policy refuses PDF; /etc is left as it is);
#  - a virtualenv in .venv with the project and all extras installed.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v pdftoppm >/dev/null 2>&1 || need+=(poppler-utils)
command -v gs >/dev/null 2>&1 || need+=(ghostscript)
command -v latexmlc >/dev/null 2>&1 || need+=(latexml)
[ -x /usr/bin/convert ] || need+=(imagemagick)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "${SCIGA_CHROMIUM:-}" ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  why="poppler-utils, ghostscript: PDF/EPS figure rasterization; latexml, imagemagick: LaTeXML conversion; chromium: the browser tests of \`sciga browse\`"
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; then
      echo "setup: could not install ${need[*]} ($why); install them with: apt-get install ${need[*]}" >&2
      exit 1
    fi
  else
    echo "setup: ${need[*]} missing ($why); install them first, e.g.: sudo apt-get install ${need[*]}" >&2
    exit 1
  fi
fi

# ImageMagick reads $XDG_CONFIG_HOME/ImageMagick/policy.xml after /etc's, so this user-level
# file re-allows the PDF/PS/EPS coders for LaTeXML's figure conversion. (Each conversion also
# writes the same policy into its own temporary config folder, so workers need not run this.)
im_dir="${XDG_CONFIG_HOME:-$HOME/.config}/ImageMagick"
if [ ! -e "$im_dir/policy.xml" ]; then
  mkdir -p "$im_dir"
  cat > "$im_dir/policy.xml" <<'POLICY'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sciga-builder's scripts/setup.sh: lets LaTeXML (through ImageMagick +
     ghostscript, which runs with -dSAFER) rasterize PDF/EPS figures, as ar5iv does. -->
<policymap>
  <policy domain="coder" rights="read|write" pattern="{PS,PS2,PS3,EPS,EPSI,EPSF,PDF}" />
</policymap>
POLICY
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -U pip wheel
if ! .venv/bin/python -m pip install -q -e ".[all]"; then
  # `all` includes the `fast` extra (pywuffs), built from source: without a C++ compiler it
  # cannot be built. Everything else is installed; PNG figures then decode with libspng
  # (the same pixels, ~2x slower) and the test of the Wuffs decoder says what is missing.
  echo "setup: retrying without the fast extra (pywuffs could not be built; it needs a C++ compiler: apt-get install g++)" >&2
  .venv/bin/python -m pip install -q -e ".[all-but-fast]"
fi
# The package's bytecode, written now: an editable install leaves it to the first import,
# and where PYTHONDONTWRITEBYTECODE is set (CI images, many containers) Python never writes
# it, so every `sciga` command compiled the whole package again (0.4 s of a 2.7 s rebuild).
.venv/bin/python -m compileall -q sciga >/dev/null
echo "setup: done. Activate with: source .venv/bin/activate"
