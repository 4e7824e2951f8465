#!/usr/bin/env bash
# The Debian packages the test suite drives for real: fio, ioping and dd (the
# agent's tools), Chromium (browser tests), QEMU, a Linux kernel and the QEMU
# guest agent (the real-guest and live host-config tests), the tools that put
# real signatures on loop devices (the agent's device-safety tests: mkfs.*,
# cryptsetup, mdadm, squashfs), virsh (libvirt's test driver needs no
# daemon), lvm2 (host-config asks lvs whether a volume is thin) and nginx
# (the production proxy's configuration, docker/nginx.conf).  Installs what is
# missing when run as root on Debian or Ubuntu; otherwise names the packages
# to install and fails.
set -euo pipefail

need=()
command -v fio >/dev/null || need+=(fio)
command -v ioping >/dev/null || need+=(ioping)
command -v chromium >/dev/null || need+=(chromium)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v busybox >/dev/null || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v modprobe >/dev/null || need+=(kmod)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v sfdisk >/dev/null || need+=(fdisk)
command -v losetup >/dev/null || need+=(mount)
command -v wipefs >/dev/null || need+=(util-linux)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v mkfs.f2fs >/dev/null || need+=(f2fs-tools)
command -v mkfs.vfat >/dev/null || need+=(dosfstools)
command -v mksquashfs >/dev/null || need+=(squashfs-tools)
command -v cryptsetup >/dev/null || need+=(cryptsetup-bin)
command -v mdadm >/dev/null || need+=(mdadm)
[ -x /usr/sbin/qemu-ga ] || need+=(qemu-guest-agent)
command -v virsh >/dev/null || need+=(libvirt-clients)
command -v lvs >/dev/null || need+=(lvm2)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
ls /boot/vmlinuz-* >/dev/null 2>&1 || need+=(linux-image-amd64)

[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian packages the tests need: ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
else
    echo "The tests need these Debian packages: ${need[*]}" >&2
    echo "Install them with: sudo apt-get install ${need[*]}" >&2
    exit 1
fi
