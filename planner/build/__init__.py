"""Stage 2, scenario + catalog -> the planning tables (``pipeline.build``): performance
estimates filtered by SLOs and pruned (``candidates``), demand per price card (``demand``),
queueing headroom (``queueing``), why a tier cannot be served (``reasons``), and the work a
scenario asks for, counted before it starts (``workload``)."""
