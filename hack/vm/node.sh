#!/bin/sh
# The VM node's system setup (test/vmnode StartNode), run by the guest's /init with busybox sh.
# It turns the initramfs into a node that containerd and the kubelet can run on, then hands
# control to the guest agent, which the host drives through a loopback forward:
#
#   /            an overlay: the host's root read-only (9p) under a tmpfs, so the host's
#                binaries and libraries (containerd, runc, CNI plugins, the kubelet) run as they
#                are and every host path means the same file in the guest
#   NODE_DISK    the node's own disk (a raw ext4 image): /var/lib/kubelet, /var/lib/containerd
#                and /var/log live there, so nodefs and imagefs are a real block filesystem
#   NODE_IMAGEFS_DISK  when set, a second ext4 disk for /var/lib/containerd alone: a dedicated
#                imagefs (the image store and, on containerd, the writable layers)
#   NODE_SWAP_DISK  when set, a raw disk made swap (busybox mkswap, swapon) before anything
#                starts, so the kubelet sees the node's swap (its LimitedSwap)
#   NODE_OUT     the host's OutDir, writable (9p tag out), at its host path too: configs in,
#                logs and results out
#   eth0         QEMU user networking, 10.0.2.15/24; 10.0.2.100 is the host's API server relay
#   lo           also carries NODE_SERVICE_IP, where the agent relays to the API server, as
#                kube-proxy would route the "kubernetes" Service
#
# Parameters (environment, set by the script StartNode generates): NODE_OUT, NODE_DISK,
# NODE_SERVICE_IP, NODE_AGENT (the vmagent binary's host path), NODE_AGENT_ARGS and, optionally,
# NODE_IMAGEFS_DISK and NODE_SWAP_DISK.
set -u
say() { echo "evictd-node: $*"; }
fail() { say "$*"; exit 1; }

: "${NODE_OUT:?}" "${NODE_DISK:?}" "${NODE_SERVICE_IP:?}" "${NODE_AGENT:?}" "${NODE_AGENT_ARGS:?}"

ip link set lo up
ip addr add "$NODE_SERVICE_IP/32" dev lo || fail "cannot add $NODE_SERVICE_IP to lo"
ip link set eth0 up || fail "no eth0 (is virtio_net loaded?)"
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2

r=/node
mkdir -p /rw "$r"
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay "$r" ||
  fail "cannot overlay a tmpfs on the host root"

mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 "$r/sys/fs/cgroup" ||
  fail "cannot mount cgroup2 in the node root"
mount -t devtmpfs devtmpfs "$r/dev"
mkdir -p "$r/dev/pts" "$r/dev/shm"
mount -t devpts devpts "$r/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$r/run"
# /tmp stays the overlay's (writable in the tmpfs upper): a checkout or an OutDir under the
# host's /tmp must stay visible at its path.

mkdir -p /disk
mount -t ext4 "$NODE_DISK" /disk || fail "cannot mount the node disk $NODE_DISK as ext4"
for d in kubelet containerd; do
  mkdir -p "/disk/$d" "$r/var/lib/$d"
  mount --bind "/disk/$d" "$r/var/lib/$d"
done
if [ -n "${NODE_IMAGEFS_DISK:-}" ]; then
  mkdir -p /imagefs
  mount -t ext4 "$NODE_IMAGEFS_DISK" /imagefs || fail "cannot mount the imagefs disk $NODE_IMAGEFS_DISK as ext4"
  mount --bind /imagefs "$r/var/lib/containerd"
fi
if [ -n "${NODE_SWAP_DISK:-}" ]; then
  mkswap "$NODE_SWAP_DISK" >/dev/null || fail "cannot mkswap $NODE_SWAP_DISK"
  swapon "$NODE_SWAP_DISK" || fail "cannot swapon $NODE_SWAP_DISK"
  say "swap on $NODE_SWAP_DISK: $(grep SwapTotal /proc/meminfo)"
fi
mkdir -p /disk/log/pods /disk/log/containers
mount --bind /disk/log "$r/var/log"

mkdir -p "$r$NODE_OUT"
mount --bind /out "$r$NODE_OUT" || fail "cannot bind the out share at $NODE_OUT"
# The host's own config of these would be wrong here; the node gets empty ones.
mkdir -p "$r/etc/containerd" "$r/etc/cni/net.d" "$r/opt/cni"
mount -t tmpfs tmpfs "$r/etc/cni/net.d"
mount -t tmpfs tmpfs "$r/etc/containerd"
echo "nameserver 127.0.0.1" >/rw/upper/etc/resolv.conf 2>/dev/null ||
  { mkdir -p /rw/upper/etc && echo "nameserver 127.0.0.1" >/rw/upper/etc/resolv.conf; }
hostname >/rw/upper/etc/hostname

say "node root ready at uptime $(cut -d' ' -f1 /proc/uptime)s; starting the agent"
# The node root becomes the mount namespace's root, as switch_root does: moved onto / and
# entered with chroot. A plain chroot into $r is not enough: runc's containers would end up
# beneath the initramfs, and an exec into one (setns) would land in the initramfs instead.
cd "$r"
mount -o move . / || fail "cannot move the node root onto /"
# The agent runs in the node root, like every process the host starts from now on.
chroot . "$NODE_AGENT" $NODE_AGENT_ARGS >>"/out/vmagent.log" 2>&1
rc=$?
say "agent exited $rc"
exit "$rc"
