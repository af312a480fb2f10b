"""Fleet scale: every session log of a team as one hive-partitioned Parquet dataset (`audit export`), and the
fleet's questions over it (`audit query`). docs/fleet.md describes the layout, the columns, the manifest and the
unit of work (unit.export_log) that any engine maps over the logs."""
