#!/usr/bin/env bash
# Builds gpuheal's OCI image from this machine's build and Debian's own files, with no registry:
# a root filesystem of the stripped gpuheal binary, exactly the shared libraries it loads (ldd),
# the dynamic loader, Debian's CA bundle and a passwd with a non-root user. Also the test bed's
# sandbox ("pause") image from tools/pause/pause.c, linked statically. Both are OCI image archives
# (oci-layout + index.json + blobs) that `ctr images import` and `skopeo copy oci-archive:` read:
#
#   build/image/gpuheal.tar   reference gpuheal:dev  (docker.io/library/gpuheal:dev once imported)
#   build/image/pause.tar     reference gpuheal-pause:dev
#
# Reproducible: the same binary gives the same bytes (sorted tar entries, fixed owner and mtime,
# gzip without a name or time). Usage: build-image.sh [BUILD_DIR]   (default build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$build/image
bin=$build/gpuheal
[[ -x $bin ]] || { echo "build-image: $bin does not exist; run 'make build' first" >&2; exit 2; }
for tool in strip gzip sha256sum gcc tar; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is not installed (scripts/setup.sh installs it)" >&2; exit 2; }
done
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[[ -f $ca_bundle ]] || { echo "build-image: $ca_bundle missing (Debian package ca-certificates)" >&2; exit 2; }

# Fixed time for every entry and the config's "created": the commit's time when in git, else 0.
epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
version=$("$bin" --version 2>/dev/null | awk '{print $NF}' || echo dev)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# tar_dir DIR FILE: a reproducible tar of DIR's contents.
tar_dir() {
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -cf "$2" .
}

# blob FILE: moves FILE into the layout's blobs, prints "sha256:<hex> <size>".
blob() {
  local sum size
  sum=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mkdir -p "$layout/blobs/sha256"
  mv "$1" "$layout/blobs/sha256/$sum"
  echo "sha256:$sum $size"
}

# oci_archive ROOTFS REF NAME USER ENTRYPOINT_JSON OUT: one layer, one manifest, an index naming REF.
oci_archive() {
  local rootfs=$1 ref=$2 name=$3 user=$4 entrypoint=$5 dest=$6
  layout=$work/layout-$name
  rm -rf "$layout" && mkdir -p "$layout"
  tar_dir "$rootfs" "$work/layer.tar"
  local diff_id
  diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  gzip -n -9 -c "$work/layer.tar" > "$work/layer.tar.gz"
  read -r layer_digest layer_size < <(blob "$work/layer.tar.gz")
  printf '{"architecture":"amd64","os":"linux","created":"%s","config":{"User":"%s","Entrypoint":%s,"Env":["PATH=/usr/bin:/bin","SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"%s","org.opencontainers.image.version":"%s"}},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"%s","created_by":"scripts/build-image.sh"}]}' \
    "$created" "$user" "$entrypoint" "$name" "$version" "$diff_id" "$created" > "$work/config.json"
  read -r config_digest config_size < <(blob "$work/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer_digest" "$layer_size" > "$work/manifest.json"
  read -r manifest_digest manifest_size < <(blob "$work/manifest.json")
  printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"docker.io/library/%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_digest" "$manifest_size" "$ref" "$ref" > "$layout/index.json"
  tar_dir "$layout" "$dest.tmp"
  mv "$dest.tmp" "$dest"
  echo "build-image: $dest  $ref  manifest $manifest_digest  $(( $(stat -c %s "$dest") / 1024 )) KiB (layer $(( layer_size / 1024 )) KiB compressed)" >&2
}

# --- gpuheal ---------------------------------------------------------------------------------
rootfs=$work/rootfs
mkdir -p "$rootfs"/{usr/bin,usr/lib/x86_64-linux-gnu,usr/lib64,etc/ssl/certs,tmp,var/lib/gpuheal}
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
ln -s usr/bin "$rootfs/bin"
strip --strip-all -o "$rootfs/usr/bin/gpuheal" "$bin"
# Every library the binary loads, under its soname (cp -L: the file, not Debian's symlink).
# (awk reads to the end: an early exit would end ldconfig with SIGPIPE, fatal under pipefail)
curl=$(ldconfig -p | awk '$1 == "libcurl.so.4" && /x86-64/ && !found {found = $NF} END {print found}')
[[ -n $curl ]] || { echo "build-image: libcurl.so.4 not found (apt-get install libcurl4)" >&2; exit 1; }
libbpf=$(ldconfig -p | awk '$1 == "libbpf.so.1" && /x86-64/ && !found {found = $NF} END {print found}')
[[ -n $libbpf ]] || { echo "build-image: libbpf.so.1 not found (apt-get install libbpf1)" >&2; exit 1; }
while read -r lib; do
  case $lib in
    */ld-linux-x86-64.so.2) cp -L "$lib" "$rootfs/usr/lib64/ld-linux-x86-64.so.2" ;;
    /*) cp -L "$lib" "$rootfs/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ;;
  esac
done < <({
  ldd "$bin"
  # libcurl is opened with dlopen when an HTTP client is made (src/core/curl_library.h): ldd of
  # the binary does not list it, so it and what it loads come from ldd of libcurl itself.
  ldd "$curl"
  echo "$curl"
  # So is libbpf, when the kernel-log doorbell loads (src/sources/kmsg_doorbell.cc).
  ldd "$libbpf"
  echo "$libbpf"
} | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' | sort -u)
[[ -f $rootfs/usr/lib64/ld-linux-x86-64.so.2 ]] || { echo "build-image: ldd named no dynamic loader for $bin" >&2; exit 1; }
strip --strip-unneeded "$rootfs"/usr/lib/x86_64-linux-gnu/*.so* 2>/dev/null || true
cp "$ca_bundle" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
printf 'hosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
chmod 1777 "$rootfs/tmp"
chmod -R u=rwX,go=rX "$rootfs/usr" "$rootfs/etc"
chmod 755 "$rootfs/usr/bin/gpuheal"
oci_archive "$rootfs" gpuheal:dev gpuheal 65532:65532 '["/usr/bin/gpuheal"]' "$out/gpuheal.tar"

# --- pause -----------------------------------------------------------------------------------
prootfs=$work/pause-rootfs
mkdir -p "$prootfs"
gcc -std=c11 -Os -static -Wall -Wextra -Werror -s -o "$prootfs/pause" "$root/tools/pause/pause.c"
chmod 755 "$prootfs/pause"
oci_archive "$prootfs" gpuheal-pause:dev gpuheal-pause 65535:65535 '["/pause"]' "$out/pause.tar"
