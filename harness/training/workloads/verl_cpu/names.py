"""The names the harness and verl's processes agree on (stdlib only: importable before verl)."""

PLUGIN = "harness.training.workloads.verl_cpu.plugin"  # VERL_USE_EXTERNAL_MODULES
PLATFORM = "harness_cpu"  # VERL_PLATFORM
ROLLOUT = "hf_generate"  # actor_rollout_ref.rollout.name
SAMPLER = "OrderedReplayBuffer"  # trainer.v1.sampler.custom_sampler.name, in sampler.py beside this file
PLATFORM_CLASS = "CpuPlatform"  # cpu_platform.py's class: named in verl's AttributeError when the shim lags verl
