"""AdamW with its learning rate cosine-annealed to zero over the run's optimizer steps,
stepped every step: the optimizer both examples train with. A run of no set length
(``--trainer.max_epochs=-1``) has no cosine, and is refused in one line.
"""

import math
from typing import Any

import lightning as L
import torch

from .errors import UserError


def adamw_cosine(module: L.LightningModule, learning_rate: float, weight_decay: float) -> Any:
    optimizer = torch.optim.AdamW(module.parameters(), lr=learning_rate, weight_decay=weight_decay)
    total_steps = module.trainer.estimated_stepping_batches
    if not math.isfinite(total_steps):
        raise UserError(
            "the cosine schedule needs a length: set --trainer.max_epochs or --trainer.max_steps"
        )
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, int(total_steps)))
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
