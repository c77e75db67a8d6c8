"""Wrong local_layers and scale_local_gradients arguments of tfdist.keras's wrappers are
named, without a job (the local variables under mpirun: tests/mpi/test_local_variables.py)."""


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
