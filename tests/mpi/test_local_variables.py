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


def test_bad_local_layers_and_settings_are_named():
    import keras
    import pytest
    import tensorflow as tf

    import tfdist.keras as hvd

    with tf.GradientTape() as tape:
        pass
    for bad in ("head", [keras.layers.Dense(2), 3]):
        with pytest.raises(TypeError, match="local_layers must be a Keras layer"):
            hvd.DistributedGradientTape(tape, local_layers=bad)
        with pytest.raises(TypeError, match="local_layers must be a Keras layer"):
            hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=bad)
    with pytest.raises(TypeError, match="scale_local_gradients"):
        hvd.PartialDistributedGradientTape(tape, scale_local_gradients="yes")
    with pytest.raises(TypeError, match="scale_local_gradients"):
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), scale_local_gradients=1)
    with pytest.raises(TypeError, match="a local variable must be"):
        hvd.DistributedGradientTape(tape).register_local_var("kernel")
