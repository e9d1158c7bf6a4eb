"""Cold-start import time of each Lambda handler, measured in fresh interpreters as Lambda starts them.

Each sample is a new ``python`` process with the layer and the function folder on ``sys.path`` and the
environment a deployed function has (so Tracer is on and patches botocore, as in Lambda); the figure is
the time the ``import`` statement takes, .pyc files already compiled (as in a built layer). The bare
imports of boto3 and Powertools are measured the same way, side by side, for reference.

    .venv/bin/python bench/cold_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER = ROOT / "layers" / "threadloom"
ENVIRONMENT = {
    "AWS_LAMBDA_FUNCTION_NAME": "threadloom-bench",
    "AWS_REGION": "eu-west-1",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "POWERTOOLS_METRICS_NAMESPACE": "Threadloom",
    "THREADLOOM_BACKEND": "postgres",
    "THREADLOOM_DB_AUTH": "iam",
    "THREADLOOM_DB_HOST": "proxy.example.internal",
}
# (label, function folder, statement, target in ms or None)
TARGETS: list[tuple[str, str | None, str, float | None]] = [
    ("API handler (threadloom_api)", "functions/api", "import threadloom_api", 400.0),
    ("compaction handler (threadloom_compaction)", "functions/compaction", "import threadloom_compaction", 250.0),
    ("reference: import boto3", None, "import boto3", None),
    ("reference: Powertools Logger + Metrics", None, "from aws_lambda_powertools import Logger, Metrics", None),
    ("reference: Powertools Tracer() (X-Ray SDK)", None, "from aws_lambda_powertools import Tracer; Tracer()", None),
]
PROBE = "import sys, time; t = time.perf_counter(); exec(sys.argv[1]); print((time.perf_counter() - t) * 1000)"


def sample(folder: str | None, statement: str, service: str) -> float:
    paths = [str(ROOT / folder)] if folder else []
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([*paths, str(LAYER)]),
        "POWERTOOLS_SERVICE_NAME": service,
        **ENVIRONMENT,
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE, statement], env=env, capture_output=True, text=True, check=True, cwd="/"
    )
    return float(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    print(f"Median import time over {runs} fresh interpreters ({sys.version.split()[0]}, .pyc compiled)")
    print(f"{'what':48} {'median':>9} {'min':>9} {'max':>9}  target")
    for label, folder, statement, target in TARGETS:
        sample(folder, statement, "threadloom-bench")  # compiles .pyc once, like a built layer
        times = [sample(folder, statement, "threadloom-bench") for _ in range(runs)]
        median = statistics.median(times)
        verdict = "" if target is None else f"<= {target:.0f} ms {'met' if median <= target else 'MISSED'}"
        print(f"{label:48} {median:7.1f}ms {min(times):7.1f}ms {max(times):7.1f}ms  {verdict}")


if __name__ == "__main__":
    main()
