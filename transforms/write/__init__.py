"""Writers at the edge: typed, sharded, deterministic Parquet."""
