#!/usr/bin/env bash
# Installs, by Debian package name and in one apt-get call, what the tests
# use beyond the image builder's own needs (which it installs itself):
#   scripts/test-deps.sh [--full]
#   tshark        pcap cross-checks (netsim, tests/network.rs, host_workload.rs)
#   cpio          the initramfs writer's cross-check
#   e2fsprogs     mke2fs for disk images
#   busybox-static  a static shell for vmm's UML tests' initramfs
#   qemu-system-x86  the nested L1 for the KVM runtime (scripts/test-kvm-nested.sh)
#   slurmctld slurmd slurm-client munge  the local Slurm (scripts/slurm/local.sh)
#   umoci skopeo  OCI image tests (tests/oci.rs)
#   flex bison bc the kernel build (the image builder would install them too)
#   chromium      (--full only) the report's screenshot test
# Nothing is installed when everything is there already (a warm machine pays
# one dpkg query). Exit status 1 when a package is missing and cannot be
# installed (not root, or apt-get failed): it names them, and
# scripts/test.sh counts the stage as failed but goes on, so the tests that
# need them say why they skip (and fail under CI=true).
set -euo pipefail
pkgs=(tshark cpio e2fsprogs busybox-static qemu-system-x86 slurmctld slurmd slurm-client munge umoci skopeo
  flex bison bc)
[ "${1:-}" = --full ] && pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} = 0 ]; then
  echo "test-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: FAILED: not root, so cannot install: ${missing[*]} (run as root, or install them; the tests that need them will skip)"
  exit 1
fi
echo "test-deps: installing ${missing[*]}"
install() {
  # tshark asks whether non-root users may capture: the default (no) is fine.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}
if ! install 2>/dev/null; then
  apt-get update -q >/dev/null || true
  install || { echo "test-deps: FAILED: apt-get could not install: ${missing[*]}"; exit 1; }
fi
echo "test-deps: installed"
