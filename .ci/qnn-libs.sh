#!/usr/bin/env bash
# Downloads Qualcomm's x86-64 QNN libraries (libQnnHtp.so and what it needs) from the PyPI
# wheel onnxruntime-qnn 2.7.0 (QNN API 2.40) into a cache folder, once, and prints the
# folder to point OXRELAX_QNN_LIB_DIR at. The libraries carry Qualcomm's license and are
# never committed. Cache: $OXRELAX_QNN_CACHE, default ~/.cache/oxrelax-qnn.
set -euo pipefail
cache=${OXRELAX_QNN_CACHE:-$HOME/.cache/oxrelax-qnn}
libs=$cache/2.7.0/onnxruntime_qnn
if [ ! -f "$libs/libQnnHtp.so" ]; then
  mkdir -p "$cache/dl"
  pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_35_x86_64 -d "$cache/dl" onnxruntime-qnn==2.7.0 >&2
  python3 -m zipfile -e "$cache"/dl/onnxruntime_qnn-2.7.0-*.whl "$cache/2.7.0"
fi
echo "$libs"
