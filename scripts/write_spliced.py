"""Write spliced long-term sequences as frame folders that ``ebmtrack track`` and ``ebmtrack eval``
read: each sequence of DATASET spliced twice (:func:`ebmtrack.data.splice.splice_set`, as
``studies/long_term.py`` splices them: 30 % of its frames replaced by another sequence's
(``-absent``) or covered (``-occluded``), splice seed 0), its frames as JPEG (quality 95) in
``OUT/NAME/img/`` and its ground truth in ``OUT/NAME/groundtruth_rect.txt``, ``nan,nan,nan,nan``
on the frames without the target (which ``eval`` scores as absent)::

    python scripts/write_spliced.py ../shared/data/sequences runs/spliced --only Couple-absent
    ebmtrack track runs/spliced/Couple-absent --init 51,47,25,62 --tracker atom-lt \
        --out runs/couple-absent.csv
    ebmtrack eval runs/spliced --trackers atom-lt,atom --out runs/spliced-eval
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.splice import splice_set
from ebmtrack.files import write_text_atomic


def write(sequence, out: Path) -> None:
    """``sequence``'s frames and ground truth into the folder ``out`` (absent frames: NaN)."""
    (out / "img").mkdir(parents=True, exist_ok=True)
    for index in range(len(sequence)):
        frame = cv2.cvtColor(sequence.frame(index), cv2.COLOR_RGB2BGR)
        cv2.imwrite(
            str(out / "img" / f"{index + 1:04d}.jpg"), frame, [cv2.IMWRITE_JPEG_QUALITY, 95]
        )
    boxes = np.where(sequence.annotated()[:, None], sequence.ground_truth, np.nan)
    text = "".join(",".join(f"{v:.2f}" for v in box) + "\n" for box in boxes)
    write_text_atomic(out / "groundtruth_rect.txt", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a folder of sequences (OTB layout)")
    parser.add_argument("out", type=Path, help="where the spliced folders go")
    parser.add_argument("--only", help="comma-separated spliced names, e.g. Couple-absent")
    args = parser.parse_args()
    if not args.dataset.is_dir():
        parser.error(f"dataset: {args.dataset} is not a folder")
    spliced = splice_set(load_folder(args.dataset), 0.3, 0)
    names = {s.name for s in spliced}
    wanted = names if args.only is None else set(args.only.split(","))
    unknown = sorted(wanted - names)
    if unknown:
        parser.error(
            f"--only: no spliced sequence {', '.join(unknown)}; valid: {', '.join(sorted(names))}"
        )
    for sequence in spliced:
        if sequence.name in wanted:
            write(sequence, args.out / sequence.name)
            print(f"{args.out / sequence.name}: {len(sequence)} frames", file=sys.stderr)


if __name__ == "__main__":
    main()
