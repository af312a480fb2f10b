"""The build hook of the optional compiled fast path; everything else is declared in pyproject.toml.

With DSH_AUDIT_COMPILE=1 in the environment (and mypy installed: `pip install --no-build-isolation`), the fast
verifier's hot modules are compiled with mypyc into extension modules installed beside their sources, which stay
the fallback. Without it the build is pure Python, as every default install is. `make test-compiled` builds it and
runs the fast path's differential and fuzz suites against it (docs/performance.md).
"""

import os

from setuptools import setup

COMPILED = ["src/dsh_audit/fastpath/verifier.py", "src/dsh_audit/fastpath/lines.py"]

if os.environ.get("DSH_AUDIT_COMPILE") == "1":
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(COMPILED, opt_level="3"))
else:
    setup()
