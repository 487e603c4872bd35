"""``Column``: the values of every batch, in order, as ``torch.cat`` gives them, across its
growth; in float32 at least, and wider when a batch is."""

import pytest
import torch

from ...regression.column import Column


def test_batches_across_its_growth_come_back_as_torch_cat_gives_them() -> None:
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randn(size, generator=generator) for size in (1, 3000, 4096, 9000, 7)]
    column = Column()
    for batch in batches:
        column.append(batch)
    assert torch.equal(column.take(), torch.cat(batches))
    column.append(batches[1])  # empty again after take
    assert torch.equal(column.take(), batches[1])


def test_bf16_values_are_kept_in_float32_and_a_wider_batch_widens_the_column() -> None:
    column = Column()
    column.append(torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    column.append(torch.tensor([3.0], dtype=torch.float64))
    taken = column.take()
    assert taken.dtype == torch.float64
    assert taken.tolist() == [1.0, 2.0, 3.0]


def test_take_before_any_batch_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no batches"):
        Column().take()
