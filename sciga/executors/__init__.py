"""How a build runs: its typed options and result (``options.py``), the chain of steps
declared once (``chain.py``), the executors that run that chain (in this process and
processes forked from it: ``in_process.py``; Apache Beam, locally or on Dataflow:
``beam_executor.py`` with ``local_run.py``, ``remote_run.py``, ``warm_workers.py`` and
``flex_template.py``; a Dask cluster: ``dask_executor.py``), choosing one and finalizing
(``build.py``, ``finalize.py``). Every executor gives the same bytes.

Nothing here reads a command line: ``sciga.pipelines`` turns flags into ``BuildOptions``.
"""
