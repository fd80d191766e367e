#!/usr/bin/env bash
# Set up a machine for sciga-builder from this checkout:
#  - system tools the TeX-source stage uses (poppler, ghostscript) and the headless browser
#    the `sciga browse` tests drive (Debian's chromium), when apt is available;
#  - a virtualenv in .venv with the project and all extras installed.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v pdftoppm >/dev/null 2>&1 || need+=(poppler-utils)
command -v gs >/dev/null 2>&1 || need+=(ghostscript)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "${SCIGA_CHROMIUM:-}" ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || echo "setup: could not install ${need[*]}"
  else
    echo "setup: please install ${need[*]} (poppler-utils, ghostscript: PDF/EPS figure rasterization; chromium: the browser tests of \`sciga browse\`)"
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -U pip wheel
.venv/bin/python -m pip install -q -e ".[all]"
echo "setup: done. Activate with: source .venv/bin/activate"
