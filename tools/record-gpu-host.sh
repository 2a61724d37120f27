#!/bin/sh
# Records real GPU-host outputs (with the exact command and host) for fixtures/recorded/.
# Run on a GPU machine: sh tools/record-gpu-host.sh OUTDIR
set +e
out=${1:-recorded}; mkdir -p "$out"; cd "$out" || exit 1
r(){ n=$1; shift; { echo "# command: $*"; echo "# host: $(hostname) date: $(date -u +%FT%TZ)"; "$@"; echo "# rc=$?"; } > "$n.txt" 2>&1; }
r nvidia-smi-q nvidia-smi -q
r nvidia-smi-query-gpu nvidia-smi --query-gpu=index,name,pci.bus_id,memory.used,memory.total --format=csv,noheader,nounits
r nvidia-smi-query-apps nvidia-smi --query-compute-apps=pid,process_name,gpu_bus_id,used_gpu_memory --format=csv,noheader,nounits
r nvidia-smi-plain nvidia-smi
r nvidia-smi-topo nvidia-smi topo -m
r numa-status sh -c 'for f in /proc/driver/nvidia/gpus/*/; do echo "== $f"; ls $f; cat $f/numa_status; cat $f/information; done'
r sysfs-nodes sh -c 'for f in online has_cpu has_memory has_normal_memory; do echo "== $f"; cat /sys/devices/system/node/$f; done; for n in /sys/devices/system/node/node*; do echo "== $n"; cat $n/cpulist; cat $n/meminfo; done'
r numactl numactl -H
r proc-meminfo cat /proc/meminfo
r systemd sh -c 'ls -d /run/systemd/system; ps -p 1 -o comm=; systemctl --version; systemctl list-units --type=service --no-pager | head -30'
r systemctl-show sh -c 'for u in $(systemctl list-units --type=service --state=running --no-legend --plain | awk "{print \$1}" | head -5); do echo "== $u"; systemctl show $u; done'
r docker sh -c 'which docker; docker version; docker ps -a --no-trunc'
r net sh -c 'ip -j addr; ip -j link; which ethtool ibv_devinfo ibstat; ibv_devinfo; ls /sys/class/infiniband /sys/class/net'
r os sh -c 'uname -a; cat /etc/os-release; lscpu; df -Pk /; id'
r cgroup sh -c 'cat /proc/self/cgroup; cat /proc/1/cgroup'
r nccl sh -c 'find / -name "libnccl*" 2>/dev/null | head; pip list 2>/dev/null | grep -i -E "nccl|torch|vllm"; python3 -c "import torch; print(torch.__version__, torch.cuda.nccl.version())"'
r nvidia-smi-q-pids nvidia-smi -q -d MEMORY,COMPUTE,PIDS
