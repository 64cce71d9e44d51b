"""int8 scanning with a proof: the exact f32 cosine top-k, found through the int8 copy.

Not the `--precision int8` embeddings (the model's weights); this is how a matrix of f32
vectors is *scanned*. The int8 kernel (`cosine_topk_int8`) ranks every row by its int8
dot product, rescores a pool of the best in exact f32 and returns the best k of the pool,
with the same f32 scores, bit for bit, as the f32 kernel. Its ids equal the f32 top-k
only when that top-k lies inside the pool; here that is checked, not hoped for:

    |x . q - x^ . q^| <= |x|_1 s_q / 2 + |q^|_1 s_x / 2        (E, per row)

for a row x with codes scaled by s_x (|x_j - x^_j| <= s_x / 2, kernel.h's formula) and
the query q likewise. Every row outside the pool ranks at most t, the pool's lowest int8
score, so its exact score is at most t + E (plus float rounding, bounded too). When that
is below the k-th exact score in the pool, strictly, no row outside can enter the top-k,
nor tie into it: the pool's top-k is the f32 top-k, ties in the same order. When the
check fails the pool grows 4-fold once, then the f32 scan answers. Either way the answer
is the f32 kernel's, ids and scores.
"""

from __future__ import annotations

import numpy as np

POOL = 2048  # rows rescored in f32 first: max(POOL, 16 k, n / 128), then 4 times that


class Int8Scan:
    """The int8 copy of one f32 matrix and what the proof needs from it."""

    def __init__(self, kern, matrix: np.ndarray) -> None:
        self.kern = kern
        self.codes, self.scales = kern.quantize_int8(matrix)
        self.l1_max = self.l2_max = 0.0  # max |x|_1, max |x|_2 (float32 sums: see proves)
        for i in range(0, len(matrix), 8192):  # in slices: no matrix-sized temporary
            a = np.abs(matrix[i : i + 8192])
            self.l1_max = max(self.l1_max, float(a.sum(axis=1).max()))
            self.l2_max = max(self.l2_max, float(np.einsum("ij,ij->i", a, a).max()) ** 0.5)
        self.scale_max = float(self.scales.max()) if len(self.scales) else 0.0
        self.stats = {"proved": 0, "widened": 0, "f32": 0}  # how queries were answered

    def topk(self, matrix: np.ndarray, query: np.ndarray, k: int, mask=None, threads=0):
        """The f32 kernel's cosine_topk(matrix, query [1, d], k, mask), via int8;
        ``threads`` as the kernels take it (0 = their rule)."""
        first = max(POOL, 16 * k, len(matrix) // 128)
        for pool in (first, first * 4):
            ids, scores, floor = self.kern.cosine_topk_int8_floor(
                self.codes, self.scales, matrix, query, k, pool=pool, mask=mask,
                threads=threads,
            )
            if floor[0] == -np.inf or self.proves(query[0], float(floor[0]), scores[0], k):
                self.stats["proved" if pool == first else "widened"] += 1
                return ids, scores
        self.stats["f32"] += 1
        return self.kern.cosine_topk(matrix, query, k, mask=mask, threads=threads)

    def proves(self, q: np.ndarray, floor: float, exact: np.ndarray, k: int) -> bool:
        """True when no row outside the pool (full, so ``floor`` is finite) can reach the
        k-th exact score of the pool: the bound of the module docstring. ``floor`` is the
        kernel's: the lowest int8 value in the pool, (float)(integer dot) * row scale in
        float32, which no row outside the pool exceeds."""
        if not np.isfinite(exact[k - 1]):
            return False
        qc, qs = self.kern.quantize_int8(np.ascontiguousarray(q.reshape(1, -1)))
        s_q = float(qs[0])
        t = floor * s_q  # no row outside the pool ranks above this
        q_l1 = float(np.abs(qc[0], dtype=np.float64).sum()) * s_q
        bound = self.l1_max * s_q / 2 + q_l1 * self.scale_max / 2
        # Float rounding: the ranking value (2 roundings), the codes' formula and the
        # float32 norms (relative, d * 2^-24 < 1e-4 of the bound for d <= 1600; more is
        # added below), and the f32 dot of the scan (d terms).
        bound *= 1 + max(1e-4, 2 * len(q) * 2.0**-24)
        d = len(q)
        rounding = abs(t) * 1e-6 + 2.0 * d * 2.0**-24 * self.l2_max * float(
            np.linalg.norm(q.astype(np.float64))
        )
        return t + bound + rounding < float(exact[k - 1])
