"""The embedded workload: a short, real PPO-shaped training driven through verl's own profiler.

Run as ``python -m harness.training.workloads.cpu_ppo.train SPEC.json`` (the harness writes SPEC.json). The
parent process imports torch, transformers, verl (and msprobe for "on" runs) once, then forks one
process per rank; ranks meet through a FileStore in the run directory, so parallel runs never
race for ports. On ``device: cuda`` rank R trains on GPU R over NCCL, and the ranks are spawned, not
forked (a CUDA context does not survive a fork); models and batches live on the GPU, in bf16 if asked.

What makes this a test of the integration and not a copy of it:
- stage methods carry ``@DistProfiler.annotate(role=...)`` exactly like verl 0.9.1's engine workers,
  the worker holds its ``DistProfiler`` as ``.profiler`` and its models at the attribute paths verl's
  ``PrecisionDebuggerProfiler`` resolves (``actor.engine.module``, ``ref.engine.module``,
  ``critic.engine.module``);
- the loop starts and stops profiling around the profiled global steps as verl's ``RayPPOTrainer``
  does (``start_profile(role="train", profile_step=N)`` outside the ``step`` timer);
- timings go through verl's own ``marked_timer`` and ``FileLogger`` (``timing_s/<name>``); each rank's own seconds
  per timer are logged beside them, the samples the overhead ratios use: wall (``wall_s/<name>/rank<R>``, before
  the barrier that waits for the other ranks), the process's CPU time (``cpu_s/...``) and the time the rank's
  thread was runnable but had no core (``wait_s/...``, from schedstat, where the kernel keeps it).

Engines: ``fsdp`` shards every model with FSDP2 (``fully_shard``) on CPU; ``megatron`` holds each model
as a list of chunks wrapped in torch DDP, the way verl's Megatron engine exposes ``engine.module``. It is
NOT megatron-core: it reproduces the layout verl's profiler sees, not Megatron's parallelism.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForTokenClassification
from verl.trainer.ppo.core_algos import compute_gae_advantage_return
from verl.utils.profiler import DistProfiler, ProfilerConfig
from verl.utils.profiler.config import PrecisionDebuggerToolConfig
from verl.utils.profiler.performance import simple_timer
from verl.utils.tracking import FileLogger

from harness.training.workloads import fault_injection
from harness.training.workloads.cpu_ppo.spec import TrainSpec

SCHEDSTAT = "/proc/thread-self/schedstat"


def runnable_wait() -> float | None:
    """This thread's seconds runnable but waiting for a core so far (schedstat's second field, ``run_delay``, in ns),
    or None where the kernel keeps no schedstat (no CONFIG_SCHED_INFO, gVisor). The calling thread only: it runs the
    stage (torch's ops at one thread per rank, msprobe's hooks), and whatever it waits for on another thread
    (msprobe's or torch's own) is time it spends blocked, which the user pays and the overhead ratios keep."""
    try:
        with open(SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Clocks:
    """A rank's clocks at one instant: wall, the process's CPU time, its thread's runnable waiting (or None)."""

    wall: float
    cpu: float
    wait: float | None

    @classmethod
    def now(cls) -> Clocks:
        return cls(time.perf_counter(), time.process_time(), runnable_wait())

    def since(self, start: Clocks) -> dict[str, float]:
        """Seconds per clock from ``start``: ``wall``, ``cpu`` and, with schedstat, ``wait``."""
        out = {"wall": self.wall - start.wall, "cpu": self.cpu - start.cpu}
        if self.wait is not None and start.wait is not None:
            out["wait"] = self.wait - start.wait
        return out


def paid(seconds: dict[str, float]) -> float:
    """Wall time less runnable waiting: the time a stage took that a core to itself would not have saved."""
    return seconds["wall"] - seconds.get("wait", 0.0)


def make_profiler(spec: TrainSpec, rank: int) -> DistProfiler:
    """A DistProfiler configured as verl's trainer configures it from ``global_profiler``."""
    if spec.profiler is None:
        return DistProfiler(rank=rank, config=ProfilerConfig(tool=None, enable=False, save_path=None, tool_config=None))
    p = spec.profiler
    tool: dict[str, Any] = {"config_path": p.config_path, "stages": list(p.stages), "strict": p.strict}
    if p.dialect == "tool-config":  # verl #5186: the tool config turns it on, filters steps, says where dumps go
        tool.update(enable=True, data_dir=p.save_path, steps=list(p.steps))
    tool_config = PrecisionDebuggerToolConfig(**tool)
    config = ProfilerConfig(
        tool="precision_debugger", enable=True, all_ranks=p.all_ranks, save_path=p.save_path, tool_config=tool_config
    )
    return DistProfiler(rank=rank, config=config, tool_config=tool_config)


class Engine:
    """Holds a model the way verl's engines expose it: ``.module`` (a list of chunks for Megatron)."""

    def __init__(self, model: torch.nn.Module, kind: str, trainable: bool, lr: float) -> None:
        if kind == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for layer in model.model.layers:
                fully_shard(layer)
            fully_shard(model)
            self.module: Any = model
        elif kind == "megatron":
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model) if trainable else model
            self.module = [model]
        else:
            raise ValueError(f"unknown engine {kind!r}")
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr) if trainable else None

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**inputs).logits

    def step(self, loss: torch.Tensor) -> None:
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


def response_logprobs(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    resp = batch["responses"]
    logits = logits[:, -resp.shape[1] - 1 : -1, :]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, resp.unsqueeze(-1)).squeeze(-1)


class ActorRefWorker:
    """Mirrors verl 0.9.1 ``ActorRolloutRefWorker``: same method names, roles and model attributes."""

    def __init__(self, profiler: DistProfiler, actor: Engine, ref: Engine) -> None:
        self.profiler = profiler
        self.actor = SimpleNamespace(engine=actor)
        self.ref = SimpleNamespace(engine=ref)

    @DistProfiler.annotate(color="blue", role="actor_compute_log_prob")
    def compute_log_prob(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return response_logprobs(self.actor.engine(input_ids=batch["input_ids"]), batch)

    @DistProfiler.annotate(color="olive", role="ref_compute_log_prob")
    def compute_ref_log_prob(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return response_logprobs(self.ref.engine(input_ids=batch["input_ids"]), batch)

    @DistProfiler.annotate(color="red", role="actor_update")
    def update_actor(self, batch: dict[str, torch.Tensor], clip: float = 0.2, kl_coef: float = 0.01) -> float:
        logp = response_logprobs(self.actor.engine(input_ids=batch["input_ids"]), batch)
        ratio = torch.exp(logp - batch["old_log_probs"])
        adv = batch["advantages"]
        pg = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
        loss = pg + kl_coef * (logp - batch["ref_log_prob"]).mean()
        self.actor.engine.step(loss)
        return float(loss.detach())


class CriticWorker:
    """The critic, with its stage methods annotated one of two ways (``critic_roles``).

    ``engine_workers``: as verl 0.9.1's engine workers do: ``infer_batch`` is not annotated and
    ``train_batch`` carries role ``train_batch``, which is not a precision_debugger stage, so the critic is
    never dumped (the known gap). ``documented``: with the stage names verl's documentation lists
    (``compute_values`` / ``critic_update``), which is what a fixed verl would do.
    """

    def __init__(self, profiler: DistProfiler, critic: Engine) -> None:
        self.profiler = profiler
        self.critic = SimpleNamespace(engine=critic)

    def _values(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        values = self.critic.engine(input_ids=batch["input_ids"])[..., 0]
        return values[:, -batch["responses"].shape[1] - 1 : -1]

    def _train(self, batch: dict[str, torch.Tensor]) -> float:
        loss = 0.5 * ((self._values(batch) - batch["returns"]) ** 2).mean()
        self.critic.engine.step(loss)
        return float(loss.detach())

    @DistProfiler.annotate(color="cyan", role="compute_values")
    def compute_values_documented(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return self._values(batch)

    @DistProfiler.annotate(color="pink", role="critic_update")
    def update_critic_documented(self, batch: dict[str, torch.Tensor]) -> float:
        return self._train(batch)

    def infer_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return self._values(batch)

    @DistProfiler.annotate(color="red", role="train_batch")
    def train_batch(self, batch: dict[str, torch.Tensor]) -> float:
        return self._train(batch)


def make_batch(spec: TrainSpec, step: int, rank: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Prompts and sampled responses standing in for rollout generation; identical in off and on runs (drawn on
    the CPU generator on every device, so a GPU run trains on the same tokens as a CPU one)."""
    gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + step * 1009 + rank)
    vocab = spec.model["vocab_size"]
    prompts = torch.randint(0, vocab, (spec.batch_size, spec.prompt_length), generator=gen)
    responses = torch.randint(0, vocab, (spec.batch_size, spec.response_length), generator=gen)
    batch = {"input_ids": torch.cat([prompts, responses], dim=1), "responses": responses}
    return {k: v.to(device) for k, v in batch.items()}


def build_models(
    spec: TrainSpec, device: torch.device | str = "cpu"
) -> tuple[torch.nn.Module, torch.nn.Module, torch.nn.Module | None]:
    """Actor, ref (same initial weights) and critic; seeded so every rank and both runs start equal. Built on the
    CPU (the same initial weights on every device), then moved to ``device`` in the spec's dtype."""
    cfg = Qwen2Config(**spec.model, num_labels=1)
    torch.manual_seed(spec.seed)
    actor = Qwen2ForCausalLM(cfg)
    ref = Qwen2ForCausalLM(cfg)
    ref.load_state_dict(actor.state_dict())
    ref.requires_grad_(False)
    critic = Qwen2ForTokenClassification(cfg) if spec.critic else None
    dtype = getattr(torch, spec.dtype)
    return actor.to(device, dtype), ref.to(device, dtype), critic.to(device, dtype) if critic else None


def device_of(spec: TrainSpec, rank: int) -> torch.device:
    """Rank R's device: GPU R (one per NCCL rank), or the CPU."""
    return torch.device("cuda", rank) if spec.cuda else torch.device("cpu")


def check_device(spec: TrainSpec) -> str | None:
    """Why this process cannot train the spec (one line), or None; the harness checks before it launches, this
    catches a container or host whose torch differs from the harness's."""
    if not spec.cuda:
        return None
    if not torch.cuda.is_available():
        return "cpu_ppo: device cuda but torch.cuda.is_available() is False in this process (a CPU build of torch?)"
    if (seen := torch.cuda.device_count()) < spec.world_size:
        return f"cpu_ppo: world_size {spec.world_size} needs {spec.world_size} GPUs (one per NCCL rank), {seen} visible"
    return None


def train(rank: int, spec: TrainSpec) -> None:
    pin(rank, spec.world_size)
    torch.set_num_threads(spec.threads_per_rank)
    if spec.cuda:
        torch.cuda.set_device(rank)
        preload(spec)  # spawned: nothing of the parent's imports came along
    store = dist.FileStore(spec.store_path, spec.world_size)
    dist.init_process_group("nccl" if spec.cuda else "gloo", store=store, rank=rank, world_size=spec.world_size)
    try:
        _train(rank, spec)
    finally:
        dist.destroy_process_group()


def pin(rank: int, world_size: int) -> None:
    """Rank R on core R when the ranks fill the cores this process may use (the 2-core runner; a container given
    as many cores as ranks), as CPU training binds its ranks (torch's launcher and numactl do the same). Measured
    with another process keeping one of two cores busy, 8 rounds of pinned and unpinned runs interleaved: the
    run-to-run spread of a profiled step against its run's unprofiled steps fell from 10.1 % to 5.4 % (actor
    update 9.3 % to 3.8 %, ref 11.1 % to 3.1 %). With cores to spare the scheduler keeps them: pinned, every
    training running side by side would stack its ranks on the same first cores."""
    cores = sorted(os.sched_getaffinity(0))
    if 1 < world_size == len(cores):
        os.sched_setaffinity(0, {cores[rank]})


def _train(rank: int, spec: TrainSpec) -> None:
    device = device_of(spec, rank)
    actor, ref, critic = build_models(spec, device)
    profiler = make_profiler(spec, rank)
    policy = ActorRefWorker(
        profiler, Engine(actor, spec.engine, True, spec.lr), Engine(ref, spec.engine, False, spec.lr)
    )
    critic_worker = (
        CriticWorker(make_profiler(spec, rank), Engine(critic, spec.engine, True, spec.lr)) if critic else None
    )
    documented = spec.critic_roles == "documented"
    logger = FileLogger(project_name="harness", experiment_name="cpu_ppo") if rank == 0 else None
    profiled = set(spec.profiler.steps) if spec.profiler else set()
    # Start-up left torch's, transformers' and the models' objects in the collector's generations; a full
    # collection over them (0.73 s of a 2.30 s profiled actor update, measured) fell in a different step in
    # every run and was the largest single noise in the overhead samples. Frozen, a collection only walks what
    # the training (and msprobe) allocate after this point, so its cost is still measured where it arises.
    gc.collect()
    gc.freeze()

    def timed(name: str, timing: dict[str, float], fn, *args):
        with simple_timer(name, timing):
            start = Clocks.now()
            out = fn(*args)
            if spec.cuda:  # the kernels are asynchronous: the stage has not finished until the GPU has
                torch.cuda.synchronize()
            if step in profiled:  # TEST ONLY: no-op unless a HARNESS_TEST_STAGE_*_PCT knob is set
                fault_injection.slow_down(paid(Clocks.now().since(start)))
            own[name] = Clocks.now().since(start)
            before = Clocks.now()
            dist.barrier()  # the driver's timer in verl waits for every rank
            for clock, s in Clocks.now().since(before).items():
                barriers[clock] = barriers.get(clock, 0.0) + s
        return out

    for step in range(1, spec.steps + 1):
        timing: dict[str, float] = {}
        own: dict[str, dict[str, float]] = {}  # this rank's seconds per timer and clock (Clocks.since)
        barriers: dict[str, float] = {}  # waiting for the other ranks (their time, not this rank's), per clock
        workers = [policy] + ([critic_worker] if critic_worker else [])
        if step in profiled:
            policy.profiler.start(role="train", profile_step=step)
            if critic_worker:
                critic_worker.profiler.start(profile_step=step)
        with simple_timer("step", timing):  # this rank's clocks inside verl's timer, as each stage's are
            step_start = Clocks.now()
            batch = make_batch(spec, step, rank, device)
            batch["old_log_probs"] = timed("old_log_prob", timing, policy.compute_log_prob, batch)
            batch["ref_log_prob"] = timed("ref", timing, policy.compute_ref_log_prob, batch)
            rewards = torch.zeros_like(batch["old_log_probs"])
            rewards[:, -1] = (batch["responses"] % 2 == 0).float().mean(-1)
            metrics: dict[str, float] = {}
            if critic_worker:
                values_fn = critic_worker.compute_values_documented if documented else critic_worker.infer_batch
                values = timed("values", timing, values_fn, batch)
                mask = torch.ones_like(values)
                adv, ret = compute_gae_advantage_return(rewards, values, mask, gamma=1.0, lam=0.95)
                batch["advantages"], batch["returns"] = adv, ret
                update_fn = critic_worker.update_critic_documented if documented else critic_worker.train_batch
                metrics["critic/vf_loss"] = timed("update_critic", timing, update_fn, batch)
            else:
                batch["advantages"] = rewards.sum(-1, keepdim=True) - rewards.sum(-1).mean()
            metrics["actor/loss"] = timed("update_actor", timing, policy.update_actor, batch)
            step_s = Clocks.now().since(step_start)
        # the step less its barriers in wall and waiting alike (a core the barrier waited for is not counted twice)
        own["step"] = {k: v - barriers.get(k, 0.0) if k != "cpu" else v for k, v in step_s.items()}
        if spec.profiler and step in profiled:
            for w in workers:
                w.profiler.stop()
            fault_injection.pad_dumps(spec.profiler.save_path, step, rank)  # TEST ONLY: no-op unless asked
        per_rank: list[dict[str, dict[str, float]]] = [{} for _ in range(spec.world_size)]
        dist.all_gather_object(per_rank, own)
        if logger is not None:
            # on a GPU the host's clocks measure the launches and the waits, not the work: verl's timers only there
            # (the overhead check reads timing_s/* when no per-rank time is logged, as for verl's trainer)
            rank_s = {} if spec.cuda else {
                f"{clock}_s/{k}/rank{r}": v
                for r, d in enumerate(per_rank) for k, clocks in d.items() for clock, v in clocks.items()
            }  # fmt: skip
            logger.log(data={**metrics, **{f"timing_s/{k}": v for k, v in timing.items()}, **rank_s}, step=step)
    if logger is not None:
        logger.finish()


def preload(spec: TrainSpec) -> None:
    """msprobe once, before the loop, so no profiled step pays for the import."""
    if spec.profiler is not None:
        import msprobe.pytorch  # noqa: F401

        fault_injection.install_delay()  # TEST ONLY: no-op unless HARNESS_TEST_DUMP_DELAY_S is set


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = TrainSpec.load(argv[0])
    if why := check_device(spec):
        print(why, file=sys.stderr, flush=True)
        return 2
    if not spec.cuda:
        preload(spec)  # the forked ranks inherit it
    started = time.monotonic()
    method = "spawn" if spec.cuda else "fork"
    mp.start_processes(train, args=(spec,), nprocs=spec.world_size, start_method=method, join=True)
    print(f"cpu_ppo: {spec.steps} steps on {spec.world_size} rank(s) in {time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
