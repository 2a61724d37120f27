#!/bin/sh
# Records real ip/ethtool/ping outputs between two network namespaces joined by a veth pair (MTU per side), for
# fixtures/recorded/netns/. Needs root, iproute2, iputils-ping, ethtool. Run: sh tools/record-netns-net.sh OUTDIR
set +e
out=${1:-recorded}; mkdir -p "$out"; cd "$out" || exit 1
s=$$; a=gla$s; b=glb$s
r(){ n=$1; shift; { echo "# command: $*"; echo "# host: $(hostname) date: $(date -u +%FT%TZ)"; "$@"; echo "# rc=$?"; } > "$n.txt" 2>&1; }
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null' EXIT
ip netns add $a; ip netns add $b
ip link add va netns $a type veth peer name vb netns $b
ip -n $a addr add 10.213.0.1/24 dev va; ip -n $b addr add 10.213.0.2/24 dev vb
for n in $a $b; do ip -n $n link set lo up; done
ip -n $a link set va mtu 9000 up; ip -n $b link set vb mtu 9000 up
r ip-addr ip -n $a -j addr show
r ip-link ip -n $a -j link show
r ip-route-get ip -n $a -j route get 10.213.0.2
r ip-route-get-unreachable ip -n $a -j route get 10.213.9.9
r ethtool-veth ip netns exec $a ethtool va
r ethtool-no-device ip netns exec $a ethtool nosuch0
r sys-speed ip netns exec $a sh -c 'for i in va lo; do echo "== $i $(cat /sys/class/net/$i/speed 2>&1) mtu=$(cat /sys/class/net/$i/mtu)"; done'
r ping-jumbo-ok ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I va 10.213.0.2
ip -n $b link set vb mtu 1500
r ping-jumbo-peer-1500 ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I va 10.213.0.2
ip -n $b link set vb mtu 9000; ip -n $a link set va mtu 1500
r ping-jumbo-local-1500 ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I va 10.213.0.2
r ip-link-1500 ip -n $a -j link show va
ip -n $a link set va mtu 9000
r ping-jumbo-no-peer ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I va 10.213.0.9
r ping-unreachable ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 10.213.9.9
ip -n $a link set va down
r ping-link-down ip netns exec $a ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I va 10.213.0.2
r ip-link-down ip -n $a -j link show va
r ethtool-veth-down ip netns exec $a ethtool va
r sys-speed-down ip netns exec $a cat /sys/class/net/va/speed
r ibv-devinfo-none sh -c 'ibv_devinfo -v'
