#!/usr/bin/env bash
# Builds the Python guard into a component with componentize-py (from PyPI: pip install componentize-py).
# Usage: policies/guard-py/build.sh [OUTPUT.wasm]   (default: target/guests/guard-py.wasm under the workspace)
# COMPONENTIZE_PY overrides the componentize-py command.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/guests/guard-py.wasm}"
# A relative OUTPUT is relative to where the script was started, not to this directory.
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
cd "$here"
"${COMPONENTIZE_PY:-componentize-py}" -d "$root/wit" -w policy-world componentize app -o "$out"
echo "built $out"
