"""Reading a finished build: DuckDB views and SQL, statistics and plots, the dataset card,
the browsable report and notebook helpers. Uses the data contract (schemas) and the
build's storage and manifest (transforms); never writes a build."""
