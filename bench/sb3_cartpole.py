"""Stable-Baselines3 PPO on CartPole-v1 with RL-Zoo's tuned hyperparameters: the baseline
that ``nox -s bench`` compares the template's PPO against.

Prints one JSON line: env steps and wall seconds at which the mean return of the last 20
finished training episodes first reached 475 (null if never), env steps per second, and
where the time went. One torch thread, like the template's PPO.
Usage: ``python bench/sb3_cartpole.py SEED [TOTAL_STEPS]``.
"""

import json
import sys
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

THRESHOLD, WINDOW = 475.0, 20


def linear(start: float):
    return lambda progress_remaining: progress_remaining * start


class FirstSolved(BaseCallback):
    """Stops training once the rolling mean of finished episodes reaches the threshold."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []
        self.steps_to_solved: int | None = None
        self.seconds_to_solved: float | None = None
        self.started = time.perf_counter()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.returns.append(float(info["episode"]["r"]))
                recent = self.returns[-WINDOW:]
                if len(recent) == WINDOW and sum(recent) / WINDOW >= THRESHOLD:
                    self.steps_to_solved = self.num_timesteps
                    self.seconds_to_solved = time.perf_counter() - self.started
                    return False
        return True


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    # One thread, as the template's PPO uses: on a shared machine PyTorch's default (one
    # per core) makes SB3's time depend on the other processes far more than on SB3.
    torch.set_num_threads(1)
    envs = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy",
        envs,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    callback = FirstSolved()
    started = time.perf_counter()
    callback.started = started
    model.learn(total_timesteps=total, callback=callback)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "seed": seed,
                "steps_to_solved": callback.steps_to_solved,
                "seconds_to_solved": callback.seconds_to_solved,
                "env_steps": model.num_timesteps,
                "train_seconds": round(seconds, 3),
                "env_steps_per_second": round(model.num_timesteps / seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
