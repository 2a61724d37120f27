#!/bin/sh
# Records a real two-GPU NCCL run (INFO logs: as is, SHM-only, forced onto sockets) and the host's network and RDMA
# facts, each file headed with the exact command and host, for fixtures/recorded/.
# Run on a machine with two GPUs: sh tools/record-nccl-pair.sh OUTDIR
set +e
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never multicast on shared GPUs
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-recorded}; mkdir -p "$out"; cd "$out" || exit 1
r(){ n=$1; shift; { echo "# command: $*"; echo "# host: $(hostname) date: $(date -u +%FT%TZ)"; "$@"; echo "# rc=$?"; } > "$n.txt" 2>&1; }
nccl="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV"
r nccl-p2p sh -c "env $nccl PORT=29531 timeout 180 python3 $here/nccl_allreduce.py $PWD/maps.tmp"
{ echo "# command: rank 0's /proc/self/maps (libnccl) and torch.cuda.nccl.version(), inside the nccl-p2p run"
  echo "# host: $(hostname) date: $(date -u +%FT%TZ)"; cat maps.tmp; } > nccl-maps.txt; rm -f maps.tmp
r nccl-shm sh -c "env $nccl NCCL_P2P_DISABLE=1 PORT=29532 timeout 180 python3 $here/nccl_allreduce.py"
r nccl-socket sh -c "env $nccl NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 PORT=29533 timeout 180 python3 $here/nccl_allreduce.py"
grep -q '^# rc=0' nccl-socket.txt || r nccl-socket-lo sh -c "env $nccl NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo PORT=29534 timeout 180 python3 $here/nccl_allreduce.py"
r ip-addr ip -j addr show
r ip-link ip -j link show
r ip-route ip -j route show
r ip-route-get sh -c 'ip -j route get 10.213.0.2; ip -j route get 127.0.0.1'
r ethtool sh -c 'which ethtool || exit 127; for i in $(ls /sys/class/net); do echo "== $i"; ethtool $i; done'
r sys-class-net sh -c 'for i in /sys/class/net/*; do echo "== $i speed=$(cat $i/speed 2>&1) mtu=$(cat $i/mtu) operstate=$(cat $i/operstate)"; done'
r infiniband sh -c 'ls -l /sys/class/infiniband /sys/class/infiniband_verbs; ls /dev/infiniband'
r ibv-devinfo sh -c 'which ibv_devinfo || exit 127; ibv_devinfo -v'
r nvidia-smi-topo nvidia-smi topo -m
r nvidia-smi-nvlink nvidia-smi nvlink -s
r nccl-libs sh -c 'find / -xdev -name "libnccl*" 2>/dev/null; python3 -m pip list 2>/dev/null | grep -i -E "nccl|torch"; which all_reduce_perf'
r os sh -c 'uname -a; cat /etc/os-release; nproc; id'
