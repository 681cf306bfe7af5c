#!/usr/bin/env bash
# The default install, as `pip install ebmtrack` gives it: a fresh virtual environment holding
# ebmtrack without extras (no PyTorch), then the demo, a `track` and an `eval` of two sequences
# of ../shared/data/sequences (where it is present) in it, and their plots checked. CI runs it
# after the tests (.ci/run).
#   bash scripts/check_default_install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check .
if "$work/venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "the default install holds PyTorch" >&2
    exit 1
fi
echo "default install: $(du -sh "$work/venv" | cut -f1)"
ebmtrack="$work/venv/bin/ebmtrack"
"$ebmtrack" demo --out "$work/demo" --no-progress
plots=("$work/demo/success.png")
sequences=../shared/data/sequences
if [ -d "$sequences/Jumping" ] && [ -d "$sequences/Couple" ]; then
    "$ebmtrack" track "$sequences/Jumping" --init 147,110,34,33 --out "$work/jumping.txt" \
        --no-progress
    "$ebmtrack" eval "$sequences" --sequences Jumping,Couple --trackers atom --out "$work/eval" \
        --no-progress
    plots+=("$work/eval/success.png" "$work/eval/precision.png")
else
    echo "$sequences is absent: track and eval not run" >&2
fi
# The default install draws the plots (matplotlib is one of its dependencies).
for plot in "${plots[@]}"; do
    if [ ! -s "$plot" ]; then
        echo "the default install wrote no $(basename "$plot") in $(dirname "$plot")" >&2
        exit 1
    fi
done
