"""Benchmarks: ``python -m tfdist.bench {allreduce,runtime,training}`` under mpirun."""
