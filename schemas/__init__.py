"""The data contract: record types, Arrow schemas, ids and the schema version."""
from sciga.schemas.version import SCHEMA_VERSION, BUILDER_VERSION  # noqa: F401
