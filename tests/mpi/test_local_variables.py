"""Local variables (per-rank heads) under mpirun against a numpy reference.

tests/workers/local_variables_worker.py: PartialDistributedOptimizer in
model.fit, DistributedGradientTape.register_local_var,
PartialDistributedGradientTape, DistributedOptimizer.register_local_var;
checkpoints keep local variables and their momenta per rank;
broadcast_variables and BroadcastGlobalVariablesCallback refuse them.
"""
from mpi_harness import run_workers


def test_local_variables_match_reference(tmp_path):
    output = run_workers("local_variables_worker.py", 2, args=[str(tmp_path)], timeout=240)
    assert output.count("local variable checks passed") == 2, output[-3000:]
