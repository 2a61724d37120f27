#!/usr/bin/env bash
# NVIDIA AIPerf in its own venv (its dependencies must not meet golive's or vLLM's): .aiperf-venv/bin/aiperf
set -euo pipefail
cd "$(dirname "$0")/.."
python3.11 -m venv .aiperf-venv
.aiperf-venv/bin/pip install -q "aiperf==0.13.0"
.aiperf-venv/bin/aiperf --version 2>/dev/null || true
