"""What reading a log from object storage costs against reading it from a local disk: `audit verify` over one
log, as a local file and as `s3://` through the spool (dsh_audit.readers.spool), alternated, best of N, CPU time
of the audit process (os.wait4: user + system), wall time and peak RSS; the object is served by moto's S3 server
on 127.0.0.1 in this process (its own CPU is not counted: a real store's is not the auditor's either).

    python benchmarks/remote_spool.py --size 100MB [--runs 3] [--log PATH]

Needs the remote extra and moto[server] (`pip install -e '.[dev]'`)."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and peak RSS (bytes) of one `audit` run."""
    import time

    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "dsh_audit", *args], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"audit {' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024   # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="100MB", help="of the generated log (generate_log.py)")
    parser.add_argument("--log", type=Path, help="an existing log instead")
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    for key in [key for key in os.environ if key.startswith("AWS_")]:
        del os.environ[key]
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                      AWS_EC2_METADATA_DISABLED="true")
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as scratch:
        log = options.log or Path(scratch) / "session.jsonl"
        if options.log is None:
            subprocess.run([sys.executable, str(HERE / "generate_log.py"), "--size", options.size, "--out", str(log)],
                           check=True, stdout=subprocess.DEVNULL)
        size = log.stat().st_size
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
            boto3.client("s3", endpoint_url=endpoint).upload_file(str(log), "bench", log.name)
            env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "DSH_AUDIT_SPOOL_DIR": scratch}
            best: dict[str, tuple[float, float, int]] = {}
            for _ in range(options.runs):
                for name, source in (("local", str(log)), ("s3", f"s3://bench/{log.name}")):
                    measured = _run(["verify", source], env)
                    best[name] = min(best.get(name, measured), measured)
        finally:
            server.stop()
    print(f"verify of one {size / 1e6:.0f} MB log, best of {options.runs} (CPU s of the audit process, wall s, "
          "peak RSS MiB):")
    for name, (cpu, wall, rss) in best.items():
        print(f"  {name:6} {cpu:6.2f} CPU s  {wall:6.2f} s  {rss >> 20:5d} MiB")
    print(f"  s3/local: {best['s3'][0] / best['local'][0]:.2f}x CPU, {best['s3'][1] / best['local'][1]:.2f}x wall")


if __name__ == "__main__":
    main()
