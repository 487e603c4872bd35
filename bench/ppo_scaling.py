"""Env steps per second against ``num_envs``, with ``sync`` and ``async`` vectorization:
where running the environments in subprocesses starts to pay.

For each ``num_envs`` in 1, 4, 16, 64 and each vectorization, one process builds the
rendered project's vector environment (``ppo.envs.make_vector_env``, as training does) and
measures, after a warm-up:
- ``env``: ``envs.step`` alone, with random actions;
- ``rollout``: ``RolloutCollector.collect`` with an untrained ``ActorCritic``: env steps,
  policy sampling, scoring and GAE, i.e. what a training run's collection costs.
Each cell steps about ``STEPS`` env steps (``num_steps = STEPS // num_envs``), one torch
thread; the figure is the median of ``REPEATS`` collections. Start-up (spawning async
workers) is left out. Usage: ``python bench/ppo_scaling.py PROJECT_DIR PACKAGE [ENV_ID]``.
"""

import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import harness

NUM_ENVS = (1, 4, 16, 64)
VECTORIZATIONS = ("sync", "async")
STEPS, REPEATS = 8192, 3


def cell(package: str, env_id: str, num_envs: int, vectorization: str) -> dict[str, float]:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    envs_module = importlib.import_module(f"{package}.ppo.envs")
    agent_module = importlib.import_module(f"{package}.ppo.agent")
    rollout_module = importlib.import_module(f"{package}.ppo.rollout")
    envs = envs_module.make_vector_env(env_id, num_envs, vectorization)
    try:
        num_steps = max(STEPS // num_envs, 1)
        envs.action_space.seed(0)
        envs.reset(seed=0)
        env_rates = []
        for _ in range(REPEATS + 1):
            actions = [envs.action_space.sample() for _ in range(num_steps)]
            tick = time.perf_counter()
            for action in actions:
                envs.step(action)
            env_rates.append(num_steps * num_envs / (time.perf_counter() - tick))
        space = envs.single_action_space
        agent = agent_module.ActorCritic(int(np.prod(envs.single_observation_space.shape)), space)
        collector = rollout_module.RolloutCollector(
            envs=envs, agent=agent, gamma=0.99, gae_lambda=0.95, reward_scale=1.0, seed=0
        )
        rollout_rates = []
        for _ in range(REPEATS + 1):
            tick = time.perf_counter()
            collector.collect(num_steps)
            rollout_rates.append(num_steps * num_envs / (time.perf_counter() - tick))
    finally:
        envs.close()
    # The first of each is a warm-up (first-call checks, caches).
    return {
        "env": statistics.median(env_rates[1:]),
        "rollout": statistics.median(rollout_rates[1:]),
    }


def main() -> None:
    if sys.argv[1] == "--cell":
        package, env_id, num_envs, vectorization = sys.argv[2:6]
        print(json.dumps(cell(package, env_id, int(num_envs), vectorization)))
        return
    result = harness.Result("scaling")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    env_id = sys.argv[3] if len(sys.argv) > 3 else "CartPole-v1"
    print(
        f"{env_id}: env steps per second, median of {REPEATS} x ~{STEPS} env steps, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rows = {}
    for num_envs in NUM_ENVS:
        for vectorization in VECTORIZATIONS:
            command = [__file__, "--cell", package, env_id, str(num_envs), vectorization]
            rows[num_envs, vectorization] = harness.worker(
                command,
                cwd=project,
                env=harness.environment(project),
                what=f"{num_envs} envs, {vectorization}",
            )
    header = "".join(f"{f'{kind} {v}':>16}" for kind in ("env", "rollout") for v in VECTORIZATIONS)
    print(f"{'num_envs':>8}{header}{'async pays':>12}")
    for num_envs in NUM_ENVS:
        figures = [rows[num_envs, v][kind] for kind in ("env", "rollout") for v in VECTORIZATIONS]
        pays = rows[num_envs, "async"]["rollout"] > rows[num_envs, "sync"]["rollout"]
        cells = "".join(f"{figure:>16.0f}" for figure in figures)
        print(f"{num_envs:>8}{cells}{'yes' if pays else 'no':>12}")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    figures = [
        harness.figure(f"{env_id}, {num_envs} envs, {kind}, {vectorization}", rate, "env steps/s")
        for (num_envs, vectorization), rates in rows.items()
        for kind, rate in rates.items()
    ]
    result.write(figures, torch_threads=1)


if __name__ == "__main__":
    main()
