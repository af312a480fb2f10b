"""dsh-audit: rebuild every model request of a dsh session log byte-for-byte and check its invariants.

    from dsh_audit import reconstruct_file, verify_paths

The names below are imported when first used (PEP 562), so that the `audit` entry point, which lives in this
package, starts without loading the library (dsh_audit.entry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import exports

_HOMES = {
    "DshAuditError": "errors", "LogReadError": "errors", "LogRejected": "errors", "Finding": "findings",
    "Cause": "fold", "RebuiltRequest": "fold", "RequestFold": "fold", "discover": "readers", "open_logs": "readers",
    "Reconstruction": "reconstruct", "iter_requests": "reconstruct", "reconstruct_file": "reconstruct",
    "reconstruct_source": "reconstruct", "LogReport": "verify", "verify_path": "verify", "verify_paths": "verify",
    "verify_source": "verify",
}
__all__ = [
    "Cause", "DshAuditError", "Finding", "LogReadError", "LogRejected", "LogReport", "RebuiltRequest",
    "Reconstruction", "RequestFold", "discover", "iter_requests", "open_logs", "reconstruct_file",
    "reconstruct_source", "verify_path", "verify_paths", "verify_source",
]

if TYPE_CHECKING:
    from .errors import DshAuditError, LogReadError, LogRejected
    from .findings import Finding
    from .fold import Cause, RebuiltRequest, RequestFold
    from .readers import discover, open_logs
    from .reconstruct import Reconstruction, iter_requests, reconstruct_file, reconstruct_source
    from .verify import LogReport, verify_path, verify_paths, verify_source


__getattr__, __dir__ = exports(__name__, _HOMES, globals())
