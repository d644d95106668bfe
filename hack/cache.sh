# SPDX-License-Identifier: Apache-2.0
# Sourced by the build scripts: a cache of built test pieces on this machine, outside any checkout,
# as Go's build cache is, so that a fresh clone does not compile the control plane or unpack the
# VM's kernel again. An entry is a directory named NAME-KEY, KEY a hash of everything its pieces
# are built from (the tools module, the script), made complete before it is given its name; the
# four newest entries of a NAME are kept (the cluster's serve this module and other releases).
# Nothing in it is ever committed.
#
# EVICTD_CACHE_DIR picks the directory (default: $XDG_CACHE_HOME/evictd, else ~/.cache/evictd);
# EVICTD_CACHE_DIR=off turns the cache off, as a cold run measures it.

cache_root() {
  if [ "${EVICTD_CACHE_DIR:-}" = off ]; then return 1; fi
  echo "${EVICTD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/evictd}"
}

# cache_get NAME KEY DEST: copies the entry's files into DEST (copies, not links: a script that
# rewrites a piece in place must not change the entry); false when there is no entry.
cache_get() {
  local root src
  root=$(cache_root) || return 1
  src="$root/$1-$2"
  [ -d "$src" ] || return 1
  mkdir -p "$3"
  cp -a --reflink=auto "$src/." "$3/"
}

# cache_put NAME KEY SRC PATH...: stores the PATHs under SRC (files or directories) as the entry,
# then removes all but the four newest entries of NAME. A failure leaves no entry and is not an
# error: the cache only saves time.
cache_put() {
  local root name=$1 key=$2 src=$3 tmp p; shift 3
  root=$(cache_root) || return 0
  [ -d "$root/$name-$key" ] && return 0
  mkdir -p "$root" || return 0
  tmp=$(mktemp -d "$root/.$name-XXXXXX") || return 0
  for p in "$@"; do
    mkdir -p "$tmp/$(dirname "$p")" && cp -a "$src/$p" "$tmp/$p" || { rm -rf "$tmp"; return 0; }
  done
  mv -T "$tmp" "$root/$name-$key" 2>/dev/null || rm -rf "$tmp"
  # shellcheck disable=SC2012
  ls -1dt "$root/$name"-* 2>/dev/null | tail -n +5 | xargs -r rm -rf
  echo "cached in $root/$name-$key"
}
