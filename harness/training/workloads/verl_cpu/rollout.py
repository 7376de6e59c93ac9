"""Rollout by transformers' ``generate`` for verl's rollout registry (verl has only vllm, sglang, trtllm).

One server per replica (a Ray actor holding the model on CPU) answers verl's token-in-token-out
``generate``; the in-worker adapter sends it the actor's weights at every sync (verl's ``naive``
checkpoint engine path), so samples come from the policy being trained, as with vLLM. Sampling is seeded
from the prompt, the global step and the sample's count, so every run of a scenario, off or on, rolls out the same
samples at each step (``seed``).
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections import Counter
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from harness.training.workloads.verl_cpu.names import ROLLOUT as NAME

# verl's request id under rollout.full_determinism (verl #6572): the sample's index in the step's batch
DETERMINISTIC_ID = re.compile(r"^det-(\d+)$")


def server_name(replica_rank: int, node_rank: int = 0) -> str:
    return f"{NAME}_server_{replica_rank}_{node_rank}"


class HFGenerateServer:
    """The replica's server: verl calls these methods by name on the actor handle."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        from transformers import AutoModelForCausalLM

        self.config = config
        path = getattr(model_config, "local_path", None) or model_config.path  # a DictConfig or an HFModelConfig
        self.model = AutoModelForCausalLM.from_pretrained(
            path, torch_dtype=torch.float32, attn_implementation="sdpa"
        ).eval()
        self.eos = self.model.generation_config.eos_token_id
        self.pad = self.model.generation_config.pad_token_id
        self.replica_rank = replica_rank
        self.global_steps = 0
        self.seen: Counter[tuple[int, int, int]] = Counter()
        self.lock = asyncio.Lock()  # one generate at a time: torch already uses the process's threads

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **_: Any
    ) -> TokenOutput:
        params = dict(sampling_params)
        budget = self.config.prompt_length + self.config.response_length - len(prompt_ids)
        max_tokens = max(1, min(params.pop("max_tokens", self.config.response_length), budget))
        temperature = float(params.get("temperature", 1.0))
        seed = self.seed(prompt_ids, request_id)
        async with self.lock:
            out = await asyncio.to_thread(self._generate, list(prompt_ids), max_tokens, temperature, params, seed)
        tokens, logprobs = out
        return TokenOutput(
            token_ids=tokens,
            log_probs=logprobs if params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def seed(self, prompt_ids: list[int], request_id: str) -> int:
        """The sample's seed: samples of one prompt differ, and a run's samples are the same as another run's.
        Samples of one prompt and step are counted in arrival order, which can differ run to run: the set of seeds
        is the same, and the trainer's batch is put in one order by verl_cpu.sampler. verl's deterministic request
        ids (``det-<index>``, verl's legacy trainer under ``full_determinism``) also tell the samples apart; the v1
        trainer gives every request ``det-0``. The replica counts too: verl spreads a prompt's samples over the
        servers, each counting from 0."""
        prompt = zlib.crc32(repr(list(prompt_ids)).encode())
        index = int(m[1]) if (m := DETERMINISTIC_ID.match(request_id)) else 0
        key = (prompt, self.global_steps, index)
        self.seen[key] += 1
        return prompt + 7919 * self.global_steps + 104729 * self.replica_rank + 15485863 * index + self.seen[key] - 1

    @torch.no_grad()
    def _generate(
        self, prompt: list[int], max_tokens: int, temperature: float, params: dict[str, Any], seed: int
    ) -> tuple[list[int], list[float]]:
        torch.manual_seed(seed)
        top_k = int(params.get("top_k", -1))
        out = self.model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=max_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=float(params.get("top_p", 1.0)),
            top_k=top_k if top_k > 0 else None,
            eos_token_id=self.eos,
            pad_token_id=self.pad,
            output_scores=True,
            return_dict_in_generate=True,
        )
        tokens = out.sequences[0, len(prompt) :].tolist()
        logprobs = [torch.log_softmax(s[0], -1)[t].item() for s, t in zip(out.scores, tokens, strict=False)]
        return tokens, logprobs

    def update_weights(self, state: dict[str, torch.Tensor]) -> int:
        own = self.model.state_dict()
        matched = {k: v for k, v in state.items() if k in own}
        if not matched:
            raise RuntimeError(f"{NAME}: none of the {len(state)} synced weights names a parameter of the model")
        self.model.load_state_dict(matched, strict=False)
        return len(matched)

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # lifecycle calls verl makes around generation and weight syncs: nothing to free on CPU
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def wait_for_requests_to_drain(self) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **_: Any) -> None: ...
    async def stop_profile(self) -> None: ...

    async def abort_all_requests(self, **_: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}


class HFGenerateReplica(RolloutReplica):
    """One server per replica, next to the replica's first worker (hybrid mode: the workers hold the actor)."""

    async def launch_servers(self) -> None:
        server: Any = (
            ray.remote(HFGenerateServer)
            .options(name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)  # a key for verl's load balancer; no HTTP


class HFServerAdapter(BaseRollout):
    """The in-worker side (verl's ``_ROLLOUT_REGISTRY[(name, 'async')]``): forwards weight syncs to the server.

    Every rank consumes the weight generator (FSDP gathers each full tensor collectively); the replica's
    first rank sends them."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        import os

        super().__init__(config, model_config, device_mesh)
        rank, tp = int(os.environ["RANK"]), self.config.tensor_model_parallel_size
        self.replica_rank = rank // tp if replica_rank == -1 else replica_rank
        self.sender = rank % tp == 0

    async def update_weights(self, weights: Any, wire_format: str = "named_tensors", **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"{NAME} rollout: wire_format {wire_format!r}")
        pairs = [p async for p in weights] if hasattr(weights, "__aiter__") else list(weights)
        state = {name: t.detach().to("cpu", torch.float32).clone() for name, t in pairs}
        if self.sender:
            server = ray.get_actor(server_name(self.replica_rank))
            await server.update_weights.remote(state)
            if kwargs.get("global_steps") is not None:
                await server.set_global_steps.remote(kwargs["global_steps"])

    async def resume(self, tags: list[str]) -> None: ...
    async def release(self) -> None: ...
