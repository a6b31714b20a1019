"""A small chain-structured table for the tabular synthesizer's mechanism tests: six
attributes, each copying a function of the previous one with probability 0.7, so that
the two-way marginals along the chain are strong and the others weaker."""
import numpy as np

from continual_synth.mechanisms.marginals import Domain

SIZES = (4, 5, 6, 2, 3, 4)
DOMAIN = Domain({f"x{i}": list(range(size)) for i, size in enumerate(SIZES)})


def records(seed=12, n=6000, sizes=SIZES, copy=0.7):
    """n records of the chain (int32 codes, one column per attribute of ``DOMAIN``, or of
    a chain of ``sizes`` whose attributes copy with probability ``copy``)."""
    rng = np.random.default_rng(seed)
    columns = [rng.choice(sizes[0], n)]
    for size in sizes[1:]:
        image = rng.integers(0, size, size=max(sizes))
        columns.append(np.where(rng.random(n) < copy, image[columns[-1]] % size,
                                rng.choice(size, n)))
    return np.stack(columns, axis=1).astype(np.int32)
