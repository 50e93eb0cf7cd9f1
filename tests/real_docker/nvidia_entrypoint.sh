#!/bin/bash
# Stand-in for the NGC images' /opt/nvidia/nvidia_entrypoint.sh (real-Docker
# test tier): like the real wrapper it prints the NGC banner on stdout before
# the command, then `exec "$@"` - so an unknown command ends the *container*
# with 127 from bash ("exec: NAME: not found"), not `docker run` with 127.
printf '\n==========\n== %s ==\n==========\n' "${NVIDIA_PRODUCT_NAME:-CUDA}"
cat <<'BANNER'

NVIDIA Release 7.3.0 (build 0000000)

Copyright (c) 2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.

This container image and its contents are governed by the NVIDIA Deep Learning Container License.
By pulling and using the container, you accept the terms and conditions of this license:
https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license

BANNER
if [ -z "${NVIDIA_VISIBLE_DEVICES:-}" ] || [ "${NVIDIA_VISIBLE_DEVICES}" = void ]; then
    echo "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available."
    echo "   Use the NVIDIA Container Toolkit to start this container with GPU support; see"
    echo "   https://docs.nvidia.com/datacenter/cloud-native/ ."
    echo
fi
if [ $# -eq 0 ]; then
    exec /bin/bash
fi
exec "$@"
