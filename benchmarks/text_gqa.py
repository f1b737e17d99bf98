"""Does the committed text-gqa study finish in 10 minutes on 2 CPU cores, and what does its report answer?

    python -m benchmarks.text_gqa [--workers 2] [--record benchmarks/text_gqa.md]

The text-gqa case of benchmarks/end_to_end.py (the blocks in text_gqa.md up to 2026-12-01 05:32 were written by
this script's first version, which quoted the same lines): `explorer study run studies/text-gqa.toml --workers 2
&& explorer report text-gqa` in a fresh folder with its own EXPLORER_CACHE_DIR, timed, with the report's answer,
its saving against multi-head attention and the rules quoted.
"""

from __future__ import annotations

import sys

from benchmarks import end_to_end
from benchmarks.common import ROOT


def main() -> None:
    end_to_end.main([str(ROOT / "studies" / "text-gqa.toml"), "--target-min", "10", *sys.argv[1:]])


if __name__ == "__main__":
    main()
