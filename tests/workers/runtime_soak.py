"""Soak: thousands of random collectives from several threads, checked against numpy.

Every batch, all ranks draw the same random spec (names from a small pool,
so the response cache is hit, invalidated and refilled; dtypes; shapes;
ops; roots; splits) and each rank submits the batch's collectives from a
pool of threads, in its own random order and with random delays. Each rank
recomputes every rank's contribution, so every result is checked against a
numpy reference. The resident memory may grow only by a bounded amount in
the second half of the run. Usage: runtime_soak.py SECONDS.
"""
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import worker_main

THREADS = 6
REDUCIBLE = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32,
             tf.float64]
ANY = REDUCIBLE + [tf.bool]
KINDS = ["allreduce", "allreduce", "allreduce", "grouped", "allgather", "broadcast",
         "reducescatter", "alltoall"]
NAMES_PER_KIND = 3


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def values(seed, rank, shape, dtype, op=None):
    """Rank's contribution: small integers, exact in every dtype and any reduction."""
    rng = np.random.default_rng([seed, rank])
    if dtype == tf.bool:
        return rng.integers(0, 2, shape).astype(bool)
    low, high = (1, 3) if op == tfdist.Product else (0, 4)
    return rng.integers(low, high, shape).astype(np.float64)


def reduce_reference(stack, op, size):
    if op == tfdist.Sum:
        return stack.sum(0)
    if op == tfdist.Average:
        return stack.sum(0) / size
    if op == tfdist.Min:
        return stack.min(0)
    if op == tfdist.Max:
        return stack.max(0)
    return stack.prod(0)


def pick_op(rng, dtype):
    ops = [tfdist.Sum, tfdist.Min, tfdist.Max, tfdist.Product]
    if dtype.is_floating:
        ops.append(tfdist.Average)
    return ops[rng.integers(len(ops))]


def make_spec(rng, batch, index, size):
    """One collective of the batch; identical on every rank."""
    kind = KINDS[rng.integers(len(KINDS))]
    name = f"soak.{kind}.{rng.integers(NAMES_PER_KIND)}"
    choices = ANY if kind in ("allgather", "broadcast", "alltoall") else REDUCIBLE
    dtype = choices[rng.integers(len(choices))]
    # Mostly small tensors (fusion), sometimes large ones (own buffer).
    elements = int(rng.choice([0, 1, 7, 100, 1000, 40_000], p=[.05, .2, .2, .25, .2, .1]))
    spec = {"kind": kind, "name": name, "dtype": dtype, "seed": batch * 1000 + index}
    if kind == "allreduce":
        spec.update(shape=[elements], op=pick_op(rng, dtype))
    elif kind == "grouped":
        spec.update(shapes=[[int(rng.integers(0, 300))] for _ in range(rng.integers(1, 5))],
                    op=pick_op(rng, dtype))
    elif kind == "allgather":
        spec.update(rows=[int(rng.integers(0, 4)) for _ in range(size)],
                    cols=int(rng.integers(1, 50)))
    elif kind == "broadcast":
        spec.update(shape=[elements], root=int(rng.integers(size)))
    elif kind == "reducescatter":
        spec.update(shape=[int(rng.integers(0, 3 * size + 2)), int(rng.integers(1, 40))],
                    op=pick_op(rng, dtype))
    else:  # alltoall: splits[r][j] rows from rank r to rank j
        spec.update(splits=rng.integers(0, 3, (size, size)).tolist(),
                    cols=int(rng.integers(1, 20)))
    return spec


def as_tensor(array, dtype):
    return tf.cast(tf.constant(array), dtype)


def run_and_check(spec, rank, size):
    kind, name, dtype, seed = spec["kind"], spec["name"], spec["dtype"], spec["seed"]
    # Small integers make every result exact, except averages (a division).
    exact = spec.get("op") != tfdist.Average
    rtol = 1e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-6

    def check(result, expected):
        result = result.numpy()
        if dtype == tf.bool:
            np.testing.assert_array_equal(result, expected, err_msg=str(spec))
        elif exact:
            np.testing.assert_array_equal(result.astype(np.float64), expected, err_msg=str(spec))
        else:
            np.testing.assert_allclose(result.astype(np.float64), expected, rtol=rtol,
                                       err_msg=str(spec))

    if kind == "allreduce":
        mine = values(seed, rank, spec["shape"], dtype, spec["op"])
        out = tfdist.allreduce(as_tensor(mine, dtype), op=spec["op"], name=name)
        stack = np.stack([values(seed, r, spec["shape"], dtype, spec["op"]) for r in range(size)])
        check(out, reduce_reference(stack, spec["op"], size))
    elif kind == "grouped":
        mine = [values(seed + 7 * i, rank, s, dtype, spec["op"])
                for i, s in enumerate(spec["shapes"])]
        outs = tfdist.grouped_allreduce([as_tensor(m, dtype) for m in mine], op=spec["op"],
                                        name=name)
        for i, (s, out) in enumerate(zip(spec["shapes"], outs)):
            stack = np.stack([values(seed + 7 * i, r, s, dtype, spec["op"])
                              for r in range(size)])
            check(out, reduce_reference(stack, spec["op"], size))
    elif kind == "allgather":
        shape = lambda r: [spec["rows"][r], spec["cols"]]  # noqa: E731
        out = tfdist.allgather(as_tensor(values(seed, rank, shape(rank), dtype), dtype),
                               name=name)
        check(out, np.concatenate([values(seed, r, shape(r), dtype) for r in range(size)]))
    elif kind == "broadcast":
        out = tfdist.broadcast(as_tensor(values(seed, rank, spec["shape"], dtype), dtype),
                               root_rank=spec["root"], name=name)
        check(out, values(seed, spec["root"], spec["shape"], dtype))
    elif kind == "reducescatter":
        rows = spec["shape"][0]
        out = tfdist.reducescatter(
            as_tensor(values(seed, rank, spec["shape"], dtype, spec["op"]), dtype),
            op=spec["op"], name=name)
        stack = np.stack([values(seed, r, spec["shape"], dtype, spec["op"]) for r in range(size)])
        counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
        start = sum(counts[:rank])
        check(out, reduce_reference(stack, spec["op"], size)[start:start + counts[rank]])
    else:
        splits = spec["splits"]
        shape = lambda r: [sum(splits[r]), spec["cols"]]  # noqa: E731
        out, received = tfdist.alltoall(
            as_tensor(values(seed, rank, shape(rank), dtype), dtype), splits=splits[rank],
            name=name)
        np.testing.assert_array_equal(received.numpy(), [splits[r][rank] for r in range(size)])
        expected = []
        for r in range(size):
            data = values(seed, r, shape(r), dtype)
            begin = sum(splits[r][:rank])
            expected.append(data[begin:begin + splits[r][rank]])
        check(out, np.concatenate(expected))
    return 1


def body():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    order_rng = np.random.default_rng(1000 + rank)  # differs per rank
    pool = ThreadPoolExecutor(max_workers=THREADS)
    start = time.monotonic()
    done = batch = 0
    rss_after_warmup = None
    while True:
        # Every rank sees the same flag: stop once rank 0's time is up.
        stop = tfdist.allreduce(
            tf.constant([1 if time.monotonic() - start > seconds else 0], tf.int32),
            op=tfdist.Max, name="soak.stop")
        if stop.numpy()[0]:
            break
        spec_rng = np.random.default_rng([42, batch])  # the same on every rank
        specs = []
        used = set()
        for index in range(int(spec_rng.integers(1, THREADS + 1))):
            spec = make_spec(spec_rng, batch, index, size)
            if spec["name"] in used:  # two in flight with one name is a local error
                continue
            used.add(spec["name"])
            specs.append(spec)
        # At most THREADS in a batch, so all are in flight at once: any order works.
        delays = order_rng.uniform(0, 0.002, len(specs))
        futures = [pool.submit(lambda s=specs[i], d=delays[i]: (time.sleep(d),
                                                                 run_and_check(s, rank, size)))
                   for i in order_rng.permutation(len(specs))]
        for future in futures:
            future.result(timeout=120)
        done += len(specs)
        batch += 1
        if rss_after_warmup is None and time.monotonic() - start > seconds / 2:
            rss_after_warmup = rss_bytes()
        if batch % 1000 == 0 and rank == 0:
            print(f"batch {batch}: {time.monotonic() - start:.1f} s, RSS {rss_bytes() / 2**20:.1f} MiB",
                  flush=True)
    pool.shutdown()
    growth = rss_bytes() - rss_after_warmup
    stats = tfdist.stats()
    print(f"rank {rank}: {done} collectives in {batch} batches, {time.monotonic() - start:.1f} s, "
          f"RSS growth after warm-up {growth / 2**20:.1f} MiB, stats {stats}", flush=True)
    assert done >= 1000, f"only {done} collectives"
    # TensorFlow keeps one kernel per (op, attributes) it has seen, names
    # included: with few names that saturates in the first half, so what grows
    # after it would be a leak per collective.
    assert growth < 16 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB in the second half"
    assert stats["tensors_reduced"] > stats["allreduce_calls"], "no fusion in the soak"
    assert stats["errors"] == 0, stats
    tfdist.shutdown()
    print(f"SOAK OK rank {rank} collectives={done}", flush=True)


if __name__ == "__main__":
    worker_main(body)
