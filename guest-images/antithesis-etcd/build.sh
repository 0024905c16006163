#!/usr/bin/env bash
# Builds the two container images docker-compose.yaml names, as `docker save`
# archives beside it (not committed; see .gitignore):
#   etcd.tar    Debian bookworm's Essential set + etcd-server (etcd 3.4)
#   client.tar  the Essential set + python3 + etcd-client (etcdctl), the
#               Antithesis Python SDK from PyPI (scripts/antithesis-python-sdk.sh)
#               in /usr/lib/python3/dist-packages, client/entrypoint.py and
#               client/helper.py, and the Test Composer template client/main
#               at /opt/antithesis/test/v1/main
# mmdebstrap installs the packages (maintainer scripts run, as in a Debian
# container), umoci makes each root one image layer and skopeo saves it as a
# docker archive. mmdebstrap, umoci and skopeo are installed with apt-get
# when missing.
#
# The archives are cached under ${SIMCLUSTER_CACHE:-~/.cache/simcluster}/antithesis-etcd/KEY,
# KEY the sha256 of this script and of every file under client/: a second
# build is a copy. Packages come from deb.debian.org (the archive's state
# of the day of the first build; later builds reuse the cached archives).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
suite=bookworm
mirror=http://deb.debian.org/debian
export SOURCE_DATE_EPOCH=1700000000

need=()
for tool in mmdebstrap umoci skopeo; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "antithesis-etcd/build.sh: ${need[*]} missing and not root: install them (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "antithesis-etcd/build.sh: installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

sdk="$("$repo/scripts/antithesis-python-sdk.sh")"
key="$( (sha256sum "$here/build.sh"; cd "$here" && find client -type f | LC_ALL=C sort | xargs sha256sum; echo "$sdk") \
  | sha256sum | cut -c1-32)"
cache="${SIMCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simcluster}/antithesis-etcd"
out="$cache/$key"

# One Debian root as a tar: the Essential set and PACKAGES, no
# documentation, and without perl: apt satisfies init-system-helpers'
# "usrmerge | usr-is-merged" with usrmerge, whose perl (about 45 MB) would
# convert a /usr that mmdebstrap creates merged, so usrmerge and perl are
# purged once everything is configured (usr-is-merged stays). Cached by
# suite and packages: a change to the client's files does not install the
# packages again.
root_tar() { # TAR PACKAGES
  # The hook's "$1" is mmdebstrap's (the root), not this function's.
  # shellcheck disable=SC2016
  local opts=(--variant=essential --include="usr-is-merged,$2" --aptopt='APT::Install-Recommends "false"'
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --customize-hook='chroot "$1" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl libperl5.36 perl-modules-5.36 >/dev/null')
  local cached
  cached="$cache/roots/$(echo "$suite ${opts[*]}" | sha256sum | cut -c1-32).tar"
  if [ ! -f "$cached" ]; then
    mkdir -p "$cache/roots"
    mmdebstrap --quiet --format=tar "${opts[@]}" "$suite" "$cached.tmp.$$" "$mirror"
    mv -f "$cached.tmp.$$" "$cached"
  fi
  cp "$cached" "$1"
}

# An OCI layout NAME:v1 of one layer (TAR), then a docker archive NAME.tar.
image() { # NAME TAR CONFIG...
  local name=$1 tar=$2
  shift 2
  umoci init --layout "$name"
  umoci new --image "$name:v1"
  umoci raw add-layer --image "$name:v1" --history.created=2023-11-14T22:13:20Z \
    --history.created_by="antithesis-etcd/build.sh" "$tar"
  umoci config --no-history --image "$name:v1" --author=simcluster --created=2023-11-14T22:13:20Z "$@"
  skopeo --insecure-policy copy --quiet "oci:$name:v1" "docker-archive:$name.tar:simcluster/antithesis-etcd-$name:v1"
}

if [ ! -f "$out/etcd.tar" ] || [ ! -f "$out/client.tar" ]; then
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  cd "$work"
  echo "antithesis-etcd/build.sh: building etcd.tar and client.tar from Debian $suite (a few minutes, once)" >&2

  root_tar etcd-root.tar etcd-server
  image etcd etcd-root.tar --config.cmd=/usr/bin/etcd --config.env=ETCD_DATA_DIR=/var/lib/etcd/data

  # The client: packages, then the SDK, the scripts and the template on top.
  mkdir -p extra/usr/lib/python3/dist-packages extra/opt/antithesis/test/v1 extra/opt/antithesis/resources
  cp -r "$sdk"/. extra/usr/lib/python3/dist-packages/
  install -m 755 "$here/client/entrypoint.py" extra/entrypoint.py
  install -m 644 "$here/client/helper.py" extra/opt/antithesis/resources/helper.py
  cp -r "$here/client/main" extra/opt/antithesis/test/v1/main
  chmod 755 extra/opt/antithesis/test/v1/main/*
  root_tar client-root.tar python3,etcd-client
  tar --sort=name --mtime=@"$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C extra -cf client-extra.tar .
  # One layer: the Debian root with the extra files appended.
  tar --concatenate -f client-root.tar client-extra.tar
  image client client-root.tar --config.entrypoint=/entrypoint.py \
    --config.env=PYTHONPATH=/opt/antithesis/resources --config.env=PYTHONDONTWRITEBYTECODE=1

  mkdir -p "$out.tmp.$$"
  mv etcd.tar client.tar "$out.tmp.$$/"
  rm -rf "$out"
  mv "$out.tmp.$$" "$out"
fi
for f in etcd.tar client.tar; do
  [ "$here/$f" -ef "$out/$f" ] && continue
  ln -f "$out/$f" "$here/$f.tmp.$$" 2>/dev/null || cp "$out/$f" "$here/$f.tmp.$$"
  mv -f "$here/$f.tmp.$$" "$here/$f"
done
echo "antithesis-etcd/build.sh: etcd.tar and client.tar ($out)" >&2
