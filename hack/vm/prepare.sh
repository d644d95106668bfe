#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prepares the pieces of the VM test ground (test/vmnode) in OUTDIR:
#
#   OUTDIR/vmlinuz             Debian's standard amd64 kernel (the one linux-image-amd64 depends on)
#   OUTDIR/vmlinux             the same kernel uncompressed, booted directly through PVH when present
#   OUTDIR/initramfs.cpio.gz   busybox-static, the virtio/9p/overlay modules and an /init (below)
#   OUTDIR/kernel/             the kernel package unpacked with dpkg-deb -x (modules, depmod'ed)
#   OUTDIR/kver                the kernel release, e.g. 6.1.0-56-amd64
#   OUTDIR/node/               runc and the CNI plugins (Debian's packages, unpacked with
#                              dpkg-deb -x, never installed on the host) for the VM node; its
#                              containerd 2 is built from Go modules (hack/build-node.sh)
#   OUTDIR/systemd/            systemd and D-Bus (Debian's packages and the libraries systemd and
#                              dbus-daemon link, unpacked with dpkg-deb -x, never installed on
#                              the host): a lower layer of the node root above the host's root,
#                              so the guest can boot systemd as its PID 1 (evictd.init=systemd)
#                              whether or not the host has it; with it the peers evictd is
#                              measured against (test/vmnode peers.go), Debian's earlyoom and
#                              systemd-oomd, installed and never enabled: a test starts them
#
# Host packages come from apt-get (qemu-system-x86, busybox-static, kmod, cpio); the kernel
# package is fetched with apt-get download and never installed. The guest's /init mounts a
# cgroup v2 hierarchy with the memory controller on /sys/fs/cgroup, the host's root read-only
# at /host (9p tag hostroot) and a writable share at /out (9p tag out), runs the command named
# by evictd.cmd= on the kernel command line with busybox sh, and powers off. With
# evictd.init=systemd on the kernel command line the script is to leave a prepared root at /node
# (hack/vm/node.sh does) and /init, instead of powering off, moves it onto / and execs systemd
# there as PID 1.
#
# A run is skipped when OUTDIR holds every piece built by this same script (a hash stamp) and
# the host tools are installed, and the pieces are copied from the machine's cache (hack/cache.sh)
# when an earlier run made them with this script and the host tools are installed; delete
# OUTDIR/.vm-stamp (and set EVICTD_CACHE_DIR=off) to force a rebuild.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/cache.sh
. "$here/../cache.sh"
out=$(mkdir -p "${1:?usage: prepare.sh OUTDIR}" && cd "$1" && pwd)
stamp="$out/.vm-stamp"
want=$(sha256sum "$here/prepare.sh" | cut -d' ' -f1)
start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1fs", e - s }'; }
say() { echo "prepare.sh: $*"; }

# jq: for the docs' commands the node's tests run as written (run.md's /configz read).
tools=(qemu-system-x86_64 busybox depmod modprobe cpio mkfs.ext4 jq)
have_tools() {
  local t
  for t in "${tools[@]}"; do command -v "$t" >/dev/null || return 1; done
  # The initramfs needs a static busybox: the guest has no libc.
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}

# What the cache keeps of OUTDIR (vmlinux only when the kernel could be uncompressed).
pieces=(vmlinuz vmlinux initramfs.cpio.gz kver kernel node systemd)
up_to_date=true
have_tools || up_to_date=false
for f in vmlinuz initramfs.cpio.gz kver node/usr/sbin/runc node/usr/lib/cni/bridge \
  systemd/usr/lib/systemd/systemd systemd/usr/bin/dbus-daemon systemd/usr/bin/systemctl \
  systemd/usr/lib/systemd/systemd-oomd systemd/usr/bin/earlyoom; do
  [ -s "$out/$f" ] || up_to_date=false
done
if $up_to_date && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "VM pieces are up to date in $out (kernel $(cat "$out/kver"); checked in $(elapsed))"
  cache_put vm "$want" "$out" $(for p in "${pieces[@]}"; do [ -e "$out/$p" ] && echo "$p"; done)
  exit 0
fi
# An interrupted run must not leave a stamp that vouches for it.
rm -f "$stamp"
if have_tools && cache_get vm "$want" "$out"; then
  echo "$want" >"$stamp"
  say "VM pieces copied from the cache ($(cache_root)/vm-$want; kernel $(cat "$out/kver")) in $(elapsed)"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "prepare.sh: needs root (apt-get install)" >&2
  exit 1
fi

# --- host packages -----------------------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
t=$(date +%s)
say "apt-get update"
apt-get update -qq
if have_tools; then
  say "host tools already installed: ${tools[*]}"
else
  say "installing qemu-system-x86 busybox-static kmod cpio e2fsprogs jq"
  apt-get install -y -qq --no-install-recommends qemu-system-x86 busybox-static kmod cpio e2fsprogs jq >/dev/null
  have_tools || { echo "prepare.sh: tools still missing after apt-get install" >&2; exit 1; }
fi
say "host packages ready in $(( $(date +%s) - t ))s ($(qemu-system-x86_64 --version | head -1))"

# --- kernel ------------------------------------------------------------------------------------
# The package linux-image-amd64 depends on, e.g. linux-image-6.1.0-56-amd64. The standard
# flavour, not -cloud-: the cloud kernel has no 9p.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null \
  | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-amd64$/ { print $2; exit }')
if [ -z "$pkg" ]; then
  echo "prepare.sh: cannot resolve the kernel package linux-image-amd64 depends on" >&2
  exit 1
fi
kver=${pkg#linux-image-}
t=$(date +%s)
dl="$out/download"
mkdir -p "$dl"
deb=$(ls "$dl/${pkg}_"*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
  say "apt-get download $pkg"
  rm -f "$dl"/linux-image-*.deb
  # As root into a directory _apt may not read: say so, or apt warns about its sandbox.
  (cd "$dl" && apt-get download -qq -o APT::Sandbox::User=root "$pkg")
  deb=$(ls "$dl/${pkg}_"*.deb | head -1)
fi
rm -rf "$out/kernel"
dpkg-deb -x "$deb" "$out/kernel"
# The package ships no modules.dep.
depmod -b "$out/kernel" "$kver"
cp "$out/kernel/boot/vmlinuz-$kver" "$out/vmlinuz"
# The uncompressed kernel boots about 2 s faster under TCG (through PVH, no decompression in
# the guest). vmlinuz is a bzImage with an xz payload: cut at the xz magic and decompress
# (xz reports the trailing bytes after the stream; what it wrote is the whole ELF).
rm -f "$out/vmlinux"
if command -v xz >/dev/null; then
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$out/vmlinuz" | head -1 | cut -d: -f1 || true)
  if [ -n "$off" ]; then
    tail -c +"$((off + 1))" "$out/vmlinuz" | xz -dc >"$out/vmlinux.tmp" 2>/dev/null || true
    if [ "$(head -c 4 "$out/vmlinux.tmp" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; then
      mv "$out/vmlinux.tmp" "$out/vmlinux"
    fi
  fi
  rm -f "$out/vmlinux.tmp"
fi
say "kernel $kver unpacked in $(( $(date +%s) - t ))s$([ -f "$out/vmlinux" ] && echo ' (with an uncompressed vmlinux)')"

# --- the node's runtime ---------------------------------------------------------------------------
# The guest runs them from the host's root (it overlays the 9p share), so their libraries
# (libc, libseccomp) are the host's own. Not Debian's containerd: it is 1.x, and Kubernetes 1.36
# and later want containerd 2 (hack/build-node.sh builds it).
t=$(date +%s)
# unpack DEST DLDIR PKG...: each package's .deb, downloaded into DLDIR once (apt-get download),
# unpacked into DEST (dpkg-deb -x), which is made afresh; nothing is installed on the host.
unpack() {
  local dest=$1 dldir=$2 p deb
  shift 2
  rm -rf "$dest"
  mkdir -p "$dest" "$dldir"
  for p in "$@"; do
    deb=$(ls "$dldir/${p}_"*.deb 2>/dev/null | head -1 || true)
    if [ -z "$deb" ]; then
      (cd "$dldir" && apt-get download -qq -o APT::Sandbox::User=root "$p")
      deb=$(ls "$dldir/${p}_"*.deb | head -1)
    fi
    dpkg-deb -x "$deb" "$dest"
  done
}
unpack "$out/node" "$dl" runc containernetworking-plugins
say "node runtime ($("$out/node/usr/sbin/runc" --version | head -1)) in $(( $(date +%s) - t ))s"

# --- systemd and D-Bus for a guest whose PID 1 is systemd ------------------------------------
# systemd, systemctl and dbus-daemon with every library they link (ldd on bookworm), but for
# libc6, which every Debian host has and whose copy the whole host root shares. The layer lies
# above the host's root in the node root's overlay: the guest's systemd is always this one.
t=$(date +%s)
systemd_pkgs=(systemd libsystemd-shared libsystemd0 dbus dbus-daemon dbus-system-bus-common dbus-bin
  libdbus-1-3 libexpat1 libacl1 libapparmor1 libaudit1 libblkid1 libcap-ng0 libcap2 libcrypt1
  libgcrypt20 libgpg-error0 libip4tc2 libkmod2 liblz4-1 liblzma5 libmount1 libpam0g libpcre2-8-0
  libseccomp2 libselinux1 libssl3 libzstd1
  systemd-oomd earlyoom)
sd="$out/systemd"
unpack "$sd" "$dl/systemd" "${systemd_pkgs[@]}"
# Bookworm's packages still ship /lib, /bin and /sbin, while its root has them as links into
# /usr: a real directory in an upper layer would hide the host's link, and its whole /lib with
# it. Fold them into usr/ as a merged-/usr system has them.
for d in bin sbin lib lib64; do
  if [ -d "$sd/$d" ] && [ ! -L "$sd/$d" ]; then
    mkdir -p "$sd/usr/$d"
    cp -a "$sd/$d/." "$sd/usr/$d/"
    rm -rf "${sd:?}/$d"
  fi
done
# Every library they link must resolve in the layer or else in the host's root.
for b in usr/lib/systemd/systemd usr/bin/systemctl usr/bin/dbus-daemon usr/lib/systemd/systemd-oomd usr/bin/oomctl usr/bin/earlyoom; do
  missing=$(LD_LIBRARY_PATH="$sd/usr/lib/x86_64-linux-gnu:$sd/usr/lib/x86_64-linux-gnu/systemd" \
    ldd "$sd/$b" 2>&1 | grep 'not found' || true)
  if [ -n "$missing" ]; then
    echo "prepare.sh: $b in the systemd layer links libraries none has: $missing" >&2
    exit 1
  fi
done
say "systemd layer ($("$sd/usr/bin/systemctl" --version 2>/dev/null | head -1 || echo "systemd"), $(du -sh "$sd" | cut -f1)) in $(( $(date +%s) - t ))s"

# --- initramfs ---------------------------------------------------------------------------------
t=$(date +%s)
root="$out/initramfs"
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,host,out,lib/modules,var,root}
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done

# The modules and what they need, in load order, without duplicates.
# virtio_blk and ext4 for the node's disk; bridge and veth for the CNI bridge plugin.
mods=(virtio_pci 9pnet_virtio 9p virtio_net virtio_console overlay virtio_blk ext4 bridge veth)
: >"$root/lib/modules/load-order"
declare -A seen=()
for m in "${mods[@]}"; do
  while read -r verb path _; do
    [ "$verb" = insmod ] || continue
    [ -n "${seen[$path]:-}" ] && continue
    seen[$path]=1
    name=$(basename "$path")
    case "$name" in
      *.ko.xz) name=${name%.xz}; xz -dc "$path" >"$root/lib/modules/$name" ;;
      *.ko.zst) name=${name%.zst}; zstd -qdc "$path" >"$root/lib/modules/$name" ;;
      *.ko.gz) name=${name%.gz}; gzip -dc "$path" >"$root/lib/modules/$name" ;;
      *) cp "$path" "$root/lib/modules/$name" ;;
    esac
    echo "$name" >>"$root/lib/modules/load-order"
  done < <(modprobe -d "$out/kernel" -S "$kver" --show-depends "$m")
done

cat >"$root/init" <<'EOF'
#!/bin/sh
# evictd VM test ground init (hack/vm/prepare.sh).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
hostname evictd-vm
echo "evictd-vm: init started at uptime $(cut -d' ' -f1 /proc/uptime)s"
while read -r m; do
  insmod "/lib/modules/$m" || echo "evictd-vm: insmod $m failed"
done </lib/modules/load-order
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
echo "+memory +pids +cpu +io" >/sys/fs/cgroup/cgroup.subtree_control
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /host ||
  echo "evictd-vm: cannot mount the host root at /host"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /out ||
  echo "evictd-vm: cannot mount the out share at /out"
cmd= init=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    evictd.cmd=*) cmd=${arg#evictd.cmd=} ;;
    evictd.init=*) init=${arg#evictd.init=} ;;
  esac
done
# The script learns from it to leave its root at /node for systemd (hack/vm/node.sh).
export EVICTD_INIT=$init
echo "evictd-vm: ready at uptime $(cut -d' ' -f1 /proc/uptime)s, cgroup controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
rc=0
if [ -z "$cmd" ]; then
  echo "evictd-vm: no evictd.cmd= on the kernel command line"
else
  # A path in the guest (/out/...) or else one on the host, read through /host.
  script=$cmd
  [ -e "$script" ] || script=/host$cmd
  if [ -e "$script" ]; then
    sh "$script"
    rc=$?
  else
    echo "evictd-vm: $cmd not found in the guest or under /host"
    rc=127
  fi
fi
echo "evictd-vm: command exited $rc at uptime $(cut -d' ' -f1 /proc/uptime)s"
if [ "$init" = systemd ] && [ "$rc" = 0 ]; then
  # As switch_root does, but keeping the initramfs (its mounts, /host and /out, stay the node
  # root's layers): the root moved onto / and entered, systemd exec'ed as PID 1 there.
  if [ -x /node/lib/systemd/systemd ] && cd /node && mount -o move . /; then
    echo "evictd-vm: exec systemd at uptime $(cut -d' ' -f1 /proc/uptime)s"
    exec chroot . /lib/systemd/systemd
  fi
  echo "evictd-vm: no node root with systemd at /node"
  rc=1
fi
sync
umount /out 2>/dev/null
echo "evictd-vm: poweroff"
poweroff -f
EOF
chmod 755 "$root/init"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$out/initramfs.cpio.gz.tmp"
mv -f "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
echo "$kver" >"$out/kver"
say "initramfs with $(wc -l <"$root/lib/modules/load-order") modules ($(tr '\n' ' ' <"$root/lib/modules/load-order")) in $(( $(date +%s) - t ))s, $(du -h "$out/initramfs.cpio.gz" | cut -f1)"

echo "$want" >"$stamp"
cache_put vm "$want" "$out" $(for p in "${pieces[@]}"; do [ -e "$out/$p" ] && echo "$p"; done)
say "VM pieces ready in $out in $(elapsed)"
