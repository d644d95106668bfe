#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
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
#
# With evictd.init=systemd on the kernel command line (/init exports it as EVICTD_INIT), the node
# boots systemd as its PID 1 instead: prepare.sh's OUTDIR/systemd, shared by QEMU over 9p with
# the tag systemd (overlayfs refuses a layer inside another, so not through /host), becomes the
# overlay's top lower layer, the agent becomes the unit vmagent.service of the
# default target evictd-node.target (with D-Bus, which the kubelet's and runc's systemd cgroup
# managers talk to), the units StartNode wrote to NODE_OUT/units (containerd, the kubelet) are
# installed, and this script leaves the root at /node for /init, which execs systemd in it.
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
lower=/host
if [ "${EVICTD_INIT:-}" = systemd ]; then
  mkdir -p /systemd
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose systemd /systemd ||
    fail "cannot mount the systemd layer (9p tag systemd)"
  [ -x /systemd/usr/lib/systemd/systemd ] || fail "no systemd in the systemd layer (hack/vm/prepare.sh makes it)"
  lower=/systemd:/host
fi
mount -t overlay -o "lowerdir=$lower,upperdir=/rw/upper,workdir=/rw/work" overlay "$r" ||
  fail "cannot overlay a tmpfs on the host root ($lower)"

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

if [ "${EVICTD_INIT:-}" = systemd ]; then
  sd=$r/etc/systemd/system
  mkdir -p "$sd" "$r/etc/systemd/system-generators" "$r/etc/systemd/journald.conf.d"
  # Nothing of the host's boot: no generator (the host's fstab, its gettys, its SysV scripts)...
  for g in "$r"/usr/lib/systemd/system-generators/*; do
    ln -sf /dev/null "$r/etc/systemd/system-generators/${g##*/}"
  done
  : >"$r/etc/fstab"
  # ... and none of what a TCG guest without devices, clock or logins does not need. tmpfiles
  # above all: its boot-time clean-up of /tmp would empty the host's OutDir under /tmp, which
  # is bound here writable.
  for u in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
    systemd-udev-trigger.service systemd-udev-settle.service systemd-hwdb-update.service \
    systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service \
    systemd-resolved.service systemd-timesyncd.service systemd-logind.service \
    getty.target getty@.service serial-getty@.service console-getty.service \
    systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service \
    systemd-tmpfiles-clean.service systemd-tmpfiles-clean.timer \
    systemd-journal-flush.service systemd-journald-audit.socket systemd-random-seed.service \
    systemd-firstboot.service systemd-machine-id-commit.service systemd-modules-load.service \
    systemd-sysctl.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount \
    kmod-static-nodes.service ldconfig.service systemd-update-utmp.service \
    systemd-update-done.service systemd-sysusers.service systemd-remount-fs.service \
    systemd-fsck-root.service systemd-pstore.service systemd-pcrphase-sysinit.service \
    systemd-boot-update.service systemd-ask-password-console.path \
    systemd-ask-password-wall.path dev-hugepages.mount dev-mqueue.mount \
    sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount \
    sys-fs-fuse-connections.mount timers.target paths.target remote-fs.target \
    cryptsetup.target swap.target tmp.mount modprobe@.service e2scrub_reap.service; do
    ln -sf /dev/null "$sd/$u"
  done
  # The host's root may be a container's (/.dockerenv): systemd would take the guest for one and
  # run as in a container; a node is a machine.
  rm -f "$r/.dockerenv"
  printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n' >"$r/etc/systemd/journald.conf.d/evictd-vm.conf"
  # D-Bus runs as messagebus: a host without dbus has no such user.
  # D-Bus's messagebus and systemd-oomd's systemd-oom (the host may have the one, not the other).
  chroot "$r" /usr/bin/systemd-sysusers || fail "cannot create the system users (messagebus, systemd-oom)"
  cat >"$sd/evictd-node.target" <<EOT
[Unit]
Description=evictd VM node (test/vmnode)
Requires=basic.target
After=basic.target
Wants=dbus.service vmagent.service
AllowIsolate=yes
EOT
  ln -sf evictd-node.target "$sd/default.target"
  # The agent needs nothing systemd starts: it comes up at once, beside sysinit.
  cat >"$sd/vmagent.service" <<EOT
[Unit]
Description=evictd VM test ground agent (test/cmd/vmagent)
DefaultDependencies=no
Conflicts=shutdown.target
Before=shutdown.target
[Service]
Environment=PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
ExecStart=$NODE_AGENT $NODE_AGENT_ARGS
StandardOutput=append:$NODE_OUT/vmagent.log
StandardError=inherit
KillMode=process
EOT
  if [ -d "/out/units" ]; then
    cp /out/units/* "$sd/" || fail "cannot install the units in $NODE_OUT/units"
  fi
  say "node root ready at /node at uptime $(cut -d' ' -f1 /proc/uptime)s; /init execs systemd in it"
  exit 0
fi

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
