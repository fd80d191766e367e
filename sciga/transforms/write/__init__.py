"""The write stage: results kept by key, one copy per paper, annotations merged, shard
groups streamed into typed, deterministic Parquet parts, then finalized with a manifest."""
