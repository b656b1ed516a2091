"""Imported first by the speed benchmarks, before numpy: the seed design's
numpy on one thread. On 2 shared cores BLAS threads contend (measured ~15x
slower matmul under load); one thread is its best case."""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
