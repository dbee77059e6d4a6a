"""The sweep engine: cells, trials, processes, records and the matrix. Imports only
:mod:`aorta_core.api` below it; nothing here reads Hydra's command line or draws a report."""
