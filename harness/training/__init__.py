"""Running trainings: the scenario's two runs (off, on), the workloads that build them, the executors that run
them, the monitor beside them, and machine-wide slots."""
