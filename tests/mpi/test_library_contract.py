"""What the library exports by name (status codes, algorithms, counters), read by Python
instead of copied, and the gradient settings' one set of rules."""
from mpi_harness import run_workers


def test_library_contract_at_two_ranks():
    output = run_workers("library_contract_worker.py", 2, timeout=240)
    assert output.count("library contract OK") == 2, output[-3000:]
