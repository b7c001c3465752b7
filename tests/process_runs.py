"""Long runs of every process-based trainer and experiment, for the process-fault tests.

``python tests/process_runs.py RUN METHOD`` starts run ``RUN`` (a key of :data:`RUNS`)
with start method ``METHOD``, prints ``started <pid>`` and trains until killed: the
"parent" that ``test_process_faults.py`` kills with SIGKILL. In-process, the tests call
``RUNS[name](method, steps)`` directly.
"""

from __future__ import annotations

import sys

import numpy as np

MODEL_SIZES = (8, 16, 16, 3)
FOREVER = 10**7
LONG = 20_000  # the pipeline trainers plan every step up front: long enough (> 10 s), not forever


def _data():
    rng = np.random.default_rng(0)
    return rng.random((96, 8), dtype=np.float32), rng.integers(0, 3, 96)


def _model():
    from course_lib.models import MLP

    return MLP(MODEL_SIZES)


def data_parallel_shm(method: str, steps: int = FOREVER):
    from course_lib.parallel.train.data import train_data_parallel

    x, y = _data()
    return train_data_parallel(_model(), x, y, workers=2, batch_size=12, steps=steps,
                               start_method=method, progress=False, timeout=30)


def data_parallel_pipe(method: str, steps: int = FOREVER):
    from course_lib.parallel.train.data import train_data_parallel

    x, y = _data()
    return train_data_parallel(_model(), x, y, workers=2, batch_size=12, steps=steps,
                               backend="pipe", start_method=method, progress=False, timeout=30)


def pipeline(method: str, steps: int = LONG):
    from course_lib.parallel.train.pipeline import train_pipeline

    x, y = _data()
    return train_pipeline(_model(), x, y, stages=2, micro_batches=2, batch_size=12, steps=steps,
                          start_method=method, progress=False, timeout=30)


def hybrid(method: str, steps: int = LONG):
    from course_lib.parallel.train.pipeline import train_pipeline

    x, y = _data()
    return train_pipeline(_model(), x, y, data=2, stages=2, micro_batches=2, batch_size=12,
                          steps=steps, start_method=method, progress=False, timeout=30)


def tensor_parallel(method: str, steps: int = FOREVER):
    from course_lib.parallel.train.tensor import train_tensor_parallel

    x, y = _data()
    return train_tensor_parallel(_model(), x, y, workers=2, batch_size=12, steps=steps,
                                 start_method=method, progress=False, timeout=30)


def parallel_map(method: str, steps: int = FOREVER):
    from course_lib.parallel.train.speedup import WorkerPool

    x, y = _data()
    model = _model()
    params = model.init_params(0)
    with WorkerPool(model, x, y, 2, batch_size=12, start_method=method, timeout=30) as pool:
        for _ in range(steps):
            pool.gradient(params)


def torch_gloo(method: str, steps: int = FOREVER):
    from course_lib.parallel.train.data import train_data_parallel

    x, y = _data()
    return train_data_parallel(_model(), x, y, workers=2, batch_size=12, steps=steps, backend="gloo",
                               start_method=method, progress=False, timeout=60)


RUNS = {f.__name__: f for f in (data_parallel_shm, data_parallel_pipe, pipeline, hybrid,
                                tensor_parallel, parallel_map, torch_gloo)}
WORKERS = {"data_parallel_shm": 2, "data_parallel_pipe": 2, "pipeline": 2, "hybrid": 4, "tensor_parallel": 2,
           "parallel_map": 2, "torch_gloo": 2}


if __name__ == "__main__":
    import os

    name, method = sys.argv[1], sys.argv[2]
    print(f"started {os.getpid()}", flush=True)
    RUNS[name](method)
