#!/usr/bin/env bash
# Create .venv and install slaplan with its test extras (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# Headless Chromium for the dashboard's browser tests (Debian's package; no browser downloads).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null || echo "could not install chromium: the dashboard browser tests need it" >&2
fi
# genai-bench in its own environment (it pins transformers, pandas, oci…); BenchmarkJobs run it as a
# subprocess (SLAPLAN_GENAI_BENCH overrides where). Skipped when already installed.
if [ ! -x .venv-genai-bench/bin/genai-bench ]; then
  python3 -m venv .venv-genai-bench
  .venv-genai-bench/bin/python -m pip install -q --upgrade pip
  .venv-genai-bench/bin/python -m pip install -q 'genai-bench==0.0.5'
fi
