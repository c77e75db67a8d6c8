"""Every public argument given a wrong type or value: the error names the argument and
what it accepts. One table; the rows run in one process at np = 1
(tests/workers/argument_errors_worker.py); tfdistrun's options are checked in
tests/unit/test_tfdistrun_options.py."""
import json

import pytest

from mpi_harness import run_workers

# id: (expression, what it raises or "ok", substrings of the message or of repr(result))
ROWS = {
    # tfdist/ops.py
    "allreduce-op-string": ('tfdist.allreduce(x, op="sum")', "TypeError",
                            ["op='sum'", "tfdist.Sum", "not the string"]),
    "allreduce-op-number": ("tfdist.allreduce(x, op=99)", "TypeError", ["op=99", "tfdist.Average"]),
    "allreduce-name": ("tfdist.allreduce(x, name=3)", "TypeError", ["name must be a string"]),
    "allreduce-prescale": ('tfdist.allreduce(x, prescale_factor="2")', "TypeError",
                           ["prescale_factor must be a number"]),
    "allreduce-postscale": ("tfdist.allreduce(x, postscale_factor=None)", "TypeError",
                            ["postscale_factor must be a number"]),
    "allreduce-algorithm": ('tfdist.allreduce(x, algorithm="fastest")', "ValueError",
                            ["'fastest'", "ring"]),
    "allreduce-algorithm-type": ("tfdist.allreduce(x, algorithm=3)", "TypeError",
                                 ["algorithm must be a string"]),
    "allreduce-compression-name": ('tfdist.allreduce(x, compression="fp16")', "ok",
                                   ["1., 1."]),
    "allreduce-compression-unknown": ('tfdist.allreduce(x, compression="fp8")', "ValueError",
                                      ["compression='fp8'", "'fp16'", ".topk(ratio)"]),
    "allreduce-compression-type": ("tfdist.allreduce(x, compression=16)", "TypeError",
                                   ["compression=16", "Compression.none"]),
    "allreduce-compression-topk": ('tfdist.allreduce(x, compression="topk")', "ValueError",
                                   ["Compression.topk(ratio)"]),
    "allreduce-compression-op": ('tfdist.allreduce(x, op=tfdist.Max, compression="bf16")',
                                 "ValueError", ["needs op=Sum or op=Average"]),
    "allreduce-dtype": ('tfdist.allreduce(tf.constant(["a"]))', "TypeError",
                        ["does not support dtype string", "float32"]),
    "grouped-not-a-list": ("tfdist.grouped_allreduce(x)", "TypeError",
                           ["tensors must be a list or tuple", "tfdist.allreduce"]),
    "grouped-op": ('tfdist.grouped_allreduce([x], op="avg")', "TypeError", ["op='avg'"]),
    "broadcast-root-range": ("tfdist.broadcast(x, root_rank=1)", "ValueError",
                             ["root_rank=1 is not a rank of this job", "size 1"]),
    "broadcast-root-type": ('tfdist.broadcast(x, root_rank="0")', "TypeError",
                            ["root_rank must be an integer rank"]),
    "allgather-name": ("tfdist.allgather(x, name=1.5)", "TypeError", ["name must be a string"]),
    "alltoall-splits": ('tfdist.alltoall(x, splits="2")', "TypeError",
                        ["splits must be None or a list of non-negative row counts"]),
    "reducescatter-op": ('tfdist.reducescatter(x, op="max")', "TypeError", ["op='max'"]),
    "barrier-name": ("tfdist.barrier(name=[])", "TypeError", ["name must be a string"]),
    # tfdist/functions.py
    "broadcast-variables-one": ("tfdist.broadcast_variables(tf.Variable(1.0))", "TypeError",
                                ["variables must be a list of variables"]),
    "broadcast-variables-root": ("tfdist.broadcast_variables([tf.Variable(1.0)], root_rank=2)",
                                 "ValueError", ["root_rank=2 is not a rank"]),
    "broadcast-object-root": ("tfdist.broadcast_object(1, root_rank=-1)", "ValueError",
                              ["root_rank=-1 is not a rank"]),
    # DistributedGradientTape
    "tape-type": ('tfdist.DistributedGradientTape("tape")', "TypeError",
                  ["tape must be a tf.GradientTape"]),
    "tape-compression-name": ('tfdist.DistributedGradientTape(tape, compression="fp16")._compression',
                              "ok", ["Compression.fp16"]),
    "tape-compression-unknown": ('tfdist.DistributedGradientTape(tape, compression="gzip")',
                                 "ValueError", ["compression='gzip'", "'powersgd'"]),
    "tape-sparse": ('tfdist.DistributedGradientTape(tape, sparse_as_dense="yes")', "TypeError",
                    ["sparse_as_dense must be True or False"]),
    "tape-groups-negative": ("tfdist.DistributedGradientTape(tape, num_groups=-1)", "ValueError",
                             ["num_groups must be >= 0"]),
    "tape-groups-type": ("tfdist.DistributedGradientTape(tape, num_groups=1.5)", "TypeError",
                         ["num_groups must be an integer"]),
    "tape-predivide-zero": ("tfdist.DistributedGradientTape(tape, gradient_predivide_factor=0)",
                            "ValueError", ["gradient_predivide_factor must be positive"]),
    "tape-predivide-op": ("tfdist.DistributedGradientTape(tape, op=tfdist.Max, "
                          "gradient_predivide_factor=2.0)", "ValueError",
                          ["gradient_predivide_factor only applies with op=Average"]),
    "tape-op": ('tfdist.DistributedGradientTape(tape, op="Sum")', "TypeError", ["op='Sum'"]),
    # DistributedOptimizer
    "optimizer-fp16": ('hvd.DistributedOptimizer(SGD(0.1), compression="fp16")'
                       ".distributed_settings.compression", "ok", ["Compression.fp16"]),
    "optimizer-bf16": ('hvd.DistributedOptimizer(SGD(0.1), compression="BF16")'
                       ".distributed_settings.compression", "ok", ["Compression.bf16"]),
    "optimizer-none": ('hvd.DistributedOptimizer(SGD(0.1), compression="none")'
                       ".distributed_settings.compression", "ok", ["Compression.none"]),
    "optimizer-powersgd": ('hvd.DistributedOptimizer(SGD(0.1), compression="powersgd")'
                           ".distributed_settings.compression", "ok", ["powersgd"]),
    "optimizer-topk": ('hvd.DistributedOptimizer(SGD(0.1), compression="topk")', "ValueError",
                       ["Compression.topk(ratio)"]),
    "optimizer-compression-unknown": ('hvd.DistributedOptimizer(SGD(0.1), compression="zip")',
                                      "ValueError", ["compression='zip'", "'bf16'"]),
    "optimizer-type": ('hvd.DistributedOptimizer("adam")', "TypeError",
                       ["optimizer must be a Keras 3 optimizer", "str"]),
    "optimizer-op": ("hvd.DistributedOptimizer(SGD(0.1), op=tfdist.Max)", "ValueError",
                     ["op=tfdist.Max is not accepted here", "tfdist.Average, tfdist.Sum"]),
    "optimizer-passes-zero": ("hvd.DistributedOptimizer(SGD(0.1), backward_passes_per_step=0)",
                              "ValueError", ["backward_passes_per_step must be >= 1"]),
    "optimizer-passes-type": ('hvd.DistributedOptimizer(SGD(0.1), backward_passes_per_step="2")',
                              "TypeError", ["backward_passes_per_step must be an integer"]),
    "optimizer-sparse": ("hvd.DistributedOptimizer(SGD(0.1), sparse_as_dense=1)", "TypeError",
                         ["sparse_as_dense must be True or False"]),
    "optimizer-average": ("hvd.DistributedOptimizer(SGD(0.1), average_aggregated_gradients=None)",
                          "TypeError", ["average_aggregated_gradients must be True or False"]),
    "optimizer-name": ("hvd.DistributedOptimizer(SGD(0.1), name=5)", "TypeError",
                       ["name must be a string"]),
    "optimizer-groups": ("hvd.DistributedOptimizer(SGD(0.1), num_groups=-2)", "ValueError",
                         ["num_groups must be >= 0"]),
    # Keras callbacks
    "broadcast-callback-type": ('hvd.callbacks.BroadcastGlobalVariablesCallback("0")', "TypeError",
                                ["root_rank must be an integer"]),
    "broadcast-callback-negative": ("hvd.callbacks.BroadcastGlobalVariablesCallback(-1)",
                                    "ValueError", ["root_rank must be >= 0"]),
    "warmup-epochs": ("hvd.callbacks.LearningRateWarmupCallback(0.1, warmup_epochs=0)",
                      "ValueError", ["warmup_epochs must be >= 1"]),
    "warmup-lr": ('hvd.callbacks.LearningRateWarmupCallback("0.1")', "TypeError",
                  ["initial_lr must be a positive number"]),
    "schedule-multiplier": ('hvd.callbacks.LearningRateScheduleCallback(0.1, "x")', "TypeError",
                            ["multiplier (a number or a function of the epoch)"]),
    "schedule-end": ("hvd.callbacks.LearningRateScheduleCallback(0.1, 0.5, start_epoch=3, "
                     "end_epoch=2)", "ValueError", ["end_epoch must be >= 4"]),
    "schedule-staircase": ('hvd.callbacks.LearningRateScheduleCallback(0.1, 0.5, staircase="no")',
                           "TypeError", ["staircase must be True or False"]),
    "backup-directory": ("hvd.callbacks.BackupAndRestore(None)", "TypeError",
                         ["directory must be a directory path"]),
    "backup-save-freq": ("hvd.callbacks.BackupAndRestore(directory, save_freq=0)", "ValueError",
                         ['save_freq must be "epoch" or a positive number of batches']),
    "backup-keep": ("hvd.callbacks.BackupAndRestore(directory, keep=0)", "ValueError",
                    ["keep must be >= 1"]),
    "backup-check-every": ('hvd.callbacks.BackupAndRestore(directory, preemption_check_every="5")',
                           "TypeError", ["preemption_check_every must be an integer"]),
    "backup-dataset-steps": ("hvd.callbacks.BackupAndRestore(directory).dataset("
                             "lambda e: None, steps_per_epoch=0)", "ValueError",
                             ["steps_per_epoch must be >= 1"]),
    "backup-dataset-function": ("hvd.callbacks.BackupAndRestore(directory).dataset(5, 3)",
                                "TypeError", ["make_epoch must be a function of the epoch"]),
    # init(**settings), through the settings object init() builds
    "init-type": ('RuntimeSettings.from_environment({}, fusion_threshold="big")', "ConfigError",
                  ["init(fusion_threshold='big')", "an integer", "TFDIST_FUSION_THRESHOLD"]),
    "init-bool": ('RuntimeSettings.from_environment({}, debug="yes")', "ConfigError",
                  ["init(debug='yes')", "True or False"]),
    "init-unknown": ("RuntimeSettings.from_environment({}, fusion_treshold=1)", "ConfigError",
                     ["unknown tfdist setting(s): fusion_treshold", "fusion_threshold"]),
    "init-negative-shutdown": ("RuntimeSettings.from_environment({}, stall_shutdown_time=-1)",
                               "ConfigError", ["TFDIST_STALL_SHUTDOWN_TIME must not be negative"]),
    "init-cycle": ("RuntimeSettings.from_environment({}, cycle_time=0)", "ConfigError",
                   ["TFDIST_CYCLE_TIME must be positive"]),
    "init-env": ('RuntimeSettings.from_environment({"TFDIST_CYCLE_TIME": "fast"})', "ConfigError",
                 ["TFDIST_CYCLE_TIME='fast' is not a valid float"]),
    "init-algorithm": ('RuntimeSettings.from_environment({}, allreduce_algorithm="fast")',
                       "ConfigError", ["TFDIST_ALLREDUCE_ALGORITHM='fast'", "rabenseifner"]),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    directory = tmp_path_factory.mktemp("arguments")
    rows, results = directory / "rows.json", directory / "results.json"
    rows.write_text(json.dumps({key: expression for key, (expression, _, _) in ROWS.items()}))
    output = run_workers("argument_errors_worker.py", 1, args=[str(rows), str(results)],
                         timeout=180)
    assert f"ARGUMENT ROWS EVALUATED {len(ROWS)}" in output, output[-4000:]
    return json.loads(results.read_text())


@pytest.mark.parametrize("row", sorted(ROWS))
def test_a_wrong_argument_is_named_with_what_it_accepts(row, outcomes):
    expression, raised, needles = ROWS[row]
    kind, message = outcomes[row]
    assert kind == raised, f"{expression}: raised {kind}: {message}"
    for needle in needles:
        assert needle in message, f"{expression}: {kind}: {message!r} lacks {needle!r}"
