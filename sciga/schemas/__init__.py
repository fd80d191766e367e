"""The data contract: record types, Arrow schemas, ids and the schema version."""

from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

__all__ = ["BUILDER_VERSION", "SCHEMA_VERSION"]
