"""Makes tests/mpi_harness.py and the models here importable; reports the case count."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def pytest_terminal_summary(terminalreporter):
    from test_differential import REPORTS
    if REPORTS:
        counts = ", ".join(f"np={size}: {report['ran']} in {report['seconds']:.0f} s"
                           for size, report in sorted(REPORTS.items()))
        terminalreporter.write_line(
            f"differential layer: {sum(r['ran'] for r in REPORTS.values())} generated and "
            f"targeted cases ({counts})")
