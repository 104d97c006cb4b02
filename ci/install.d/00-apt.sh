#!/usr/bin/env bash
# Debian packages: Mesa lavapipe (wgpu on the CPU, for kernel tests), Python venv support,
# openssl (benchmark anchor), curl, g++ (libfuzzer-sys compiles libFuzzer for the fuzz targets),
# slurm-wlm, munge and procps (a single-node Slurm runs the distributed publication: checks.d/47).
set -euo pipefail
pkgs=(mesa-vulkan-drivers libvulkan1 python3-venv openssl curl g++ slurm-wlm munge procps)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "missing Debian packages: ${missing[*]}; install them as root:" \
                "apt-get install --no-install-recommends ${missing[*]}" >&2
            exit 1
        fi
    fi
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
