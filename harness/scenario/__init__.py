"""The scenario file: its blocks, the stages it names, the model assembled from the registered workloads and
executors, the loader, and what a scenario needs of the host."""
