"""Shared utilities of the stages: errors, dead letters, the per-paper stage base, progress,
the result store and storage access. Every stage may use them; they use only schemas."""
