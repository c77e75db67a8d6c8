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
    "init-process-sets": ('tfdist.init(process_sets="x")', "TypeError",
                          ["process_sets must be a list of tfdist.ProcessSet"]),
    # the rest of tfdist's API
    "grouped-allgather-not-a-list": ("tfdist.grouped_allgather(x)", "TypeError",
                                     ["tensors must be a list or tuple", "tfdist.allgather"]),
    "grouped-reducescatter-op": ('tfdist.grouped_reducescatter([x], op="sum")', "TypeError",
                                 ["op='sum'", "tfdist.Sum"]),
    "broadcast-object-root-type": ('tfdist.broadcast_object(1, root_rank="0")', "TypeError",
                                   ["root_rank must be an integer rank"]),
    "broadcast-variables-item": ("tfdist.broadcast_variables([1.0])", "TypeError",
                                 ["variables must be a list of variables", "item 0 is 1.0"]),
    "algorithm-for-nbytes": ('tfdist.algorithm_for("big")', "TypeError",
                             ["nbytes must be an integer >= 0", "'big'"]),
    "algorithm-for-negative": ("tfdist.algorithm_for(-1)", "ValueError",
                               ["nbytes must be >= 0, got -1"]),
    "algorithm-for-name": ('tfdist.algorithm_for(10, algorithm="fast")', "ValueError",
                           ["algorithm='fast'", "'ring'", "'auto'"]),
    "partial-tape-layers": ("tfdist.PartialDistributedGradientTape(tape, local_layers=5)",
                            "TypeError", ["local_layers must be a Keras layer or a list"]),
    # process sets (the argument of every collective, and the sets themselves)
    "allreduce-process-set": ("tfdist.allreduce(x, process_set=[0])", "TypeError",
                              ["process_set must be a tfdist.ProcessSet", "[0] (list)"]),
    "process-set-ranks": ('tfdist.ProcessSet("01")', "TypeError",
                          ["ranks must be a list of integer ranks"]),
    "process-set-rank-type": ("tfdist.ProcessSet([1.5])", "TypeError",
                              ["ranks must be integers, got 1.5"]),
    "add-process-set-repeated": ("tfdist.add_process_set([0, 0])", "ValueError",
                                 ["ranks must be distinct"]),
    "add-process-set-range": ("tfdist.add_process_set([5])", "ValueError",
                              ["not ranks of this job", "size 1"]),
    "optimizer-process-set": ('hvd.DistributedOptimizer(SGD(0.1), process_set="x")',
                              "TypeError", ["process_set must be a tfdist.ProcessSet"]),
    "metric-callback-process-set": ('hvd.callbacks.MetricAverageCallback(process_set="x")',
                                    "TypeError", ["process_set must be a tfdist.ProcessSet"]),
    # compressors
    "topk-ratio": ("tfdist.Compression.topk(2.0)", "ValueError",
                   ["Compression.topk: ratio must be a number in (0, 1]"]),
    "topk-error-feedback": ('tfdist.Compression.topk(0.1, error_feedback="y")', "TypeError",
                            ["Compression.topk: error_feedback must be True or False"]),
    "powersgd-rank": ("tfdist.Compression.powersgd(0)", "ValueError",
                      ["Compression.powersgd: rank must be an integer >= 1"]),
    "powersgd-error-feedback": ("tfdist.Compression.powersgd(1, error_feedback=None)",
                                "TypeError",
                                ["Compression.powersgd: error_feedback must be True or False"]),
    "tape-compression-factory": ("tfdist.DistributedGradientTape(tape, "
                                 "compression=tfdist.Compression.topk)", "TypeError",
                                 ["expected a tfdist.Compression compressor"]),
    # the rest of tfdist.keras
    "partial-optimizer-layers": ("hvd.PartialDistributedOptimizer(SGD(0.1), local_layers=5)",
                                 "TypeError", ["local_layers must be a Keras layer or a list"]),
    "optimizer-predivide": ('hvd.DistributedOptimizer(SGD(0.1), gradient_predivide_factor="2")',
                            "TypeError", ["gradient_predivide_factor must be a positive number"]),
    "optimizer-scale-local": ('hvd.DistributedOptimizer(SGD(0.1), scale_local_gradients="y")',
                              "TypeError", ["scale_local_gradients must be True or False"]),
    "load-model-compression": ('hvd.load_model("model.keras", compression="zip")', "ValueError",
                               ["compression='zip'", "'fp16'"]),
    "warmup-steps": ("hvd.callbacks.LearningRateWarmupCallback(0.1, steps_per_epoch=0)",
                     "ValueError", ["steps_per_epoch must be >= 1"]),
    "warmup-verbose": ('hvd.callbacks.LearningRateWarmupCallback(0.1, verbose="x")', "TypeError",
                       ["verbose must be an integer >= 0"]),
    "backup-keep-type": ('hvd.callbacks.BackupAndRestore(directory, keep="3")', "TypeError",
                         ["keep must be an integer >= 1"]),
    # tfdist.checkpoint
    "checkpoint-save-directory": ("tfdist.checkpoint.save(None, 1, variables=[tf.Variable(1.0)])",
                                  "TypeError", ["directory must be a directory path"]),
    "checkpoint-save-step": ("tfdist.checkpoint.save(directory, -1)", "ValueError",
                             ["step must be a non-negative integer, got -1"]),
    "checkpoint-save-variables": ("tfdist.checkpoint.save(directory, 1, variables=5)",
                                  "TypeError", ["variables must be a list of variables"]),
    "checkpoint-save-model": ('tfdist.checkpoint.save(directory, 1, model="m")', "TypeError",
                              ["model must be a Keras model"]),
    "checkpoint-save-keep": ('tfdist.checkpoint.save(directory, 1, keep="3")', "TypeError",
                             ["keep must be an integer >= 1"]),
    "checkpoint-save-blocking": ('tfdist.checkpoint.save(directory, 1, blocking="no")',
                                 "TypeError", ["blocking must be True or False"]),
    "checkpoint-save-extra": ("tfdist.checkpoint.save(directory, 1, extra=5)", "TypeError",
                              ["extra must be a JSON-serialisable dict"]),
    "checkpoint-restore-directory": ("tfdist.checkpoint.restore(5)", "TypeError",
                                     ["directory must be a directory path", "got 5"]),
    "checkpoint-restore-variables": ("tfdist.checkpoint.restore(directory, "
                                     "variables=tf.Variable(1.0))", "TypeError",
                                     ["variables must be a list of variables"]),
    "checkpoint-latest-directory": ("tfdist.checkpoint.latest(5)", "TypeError",
                                    ["directory must be a directory path"]),
    # tfdist.elastic and tfdist.keras.elastic
    "elastic-tensorflow-state": ("tfdist.elastic.TensorFlowState(variables=5)", "TypeError",
                                 ["variables must be a list of variables"]),
    "elastic-state-reserved": ("tfdist.elastic.State(restore=2)", "ValueError",
                               ["'restore' would hide the State's own 'restore'"]),
    "keras-state-model": ('hvd.elastic.KerasState("m")', "TypeError",
                          ["model must be a Keras model"]),
    "commit-callback-batches": ("hvd.elastic.CommitStateCallback(hvd.elastic.KerasState(model), "
                                "batches_per_commit=0)", "ValueError",
                                ["batches_per_commit must be an integer >= 1"]),
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
