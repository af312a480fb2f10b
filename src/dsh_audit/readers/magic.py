"""The first bytes that tell a log's format, apart from the readers of each format: telling a file's kind needs
neither SQLite nor zstandard loaded, and a run that meets only plain JSONL never loads them."""

from __future__ import annotations

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528 little-endian
SQLITE_MAGIC = b"SQLite format 3\x00"
APPLICATION_ID = 0x44534850  # "DSHP": a dsh session store's SQLite application_id
