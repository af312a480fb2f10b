"""dsh-audit: rebuild every model request of a dsh session log byte-for-byte and check its invariants.

    from dsh_audit import reconstruct_file, verify_paths
"""

from .errors import DshAuditError, LogReadError, LogRejected
from .findings import Finding
from .fold import Cause, RebuiltRequest, RequestFold
from .readers import discover, open_logs
from .reconstruct import Reconstruction, iter_requests, reconstruct_file, reconstruct_source
from .verify import LogReport, verify_path, verify_paths, verify_source

__all__ = [
    "Cause", "DshAuditError", "Finding", "LogReadError", "LogRejected", "LogReport", "RebuiltRequest",
    "Reconstruction", "RequestFold", "discover", "iter_requests", "open_logs", "reconstruct_file",
    "reconstruct_source", "verify_path", "verify_paths", "verify_source",
]
