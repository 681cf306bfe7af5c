import pytest
import torch

from ebmtrack.training.batch_sampler import RankBatchSampler, epoch_order


def test_ranks_split_each_global_batch_of_the_single_process_run():
    single = list(RankBatchSampler(50, 40, 8, seed=3, epoch=2))
    ranks = [
        list(RankBatchSampler(50, 40, 8, rank=r, world_size=4, seed=3, epoch=2)) for r in range(4)
    ]
    assert len(single) == 5 and all(len(batches) == 5 for batches in ranks)
    for step, batch in enumerate(single):
        assert sum((ranks[r][step] for r in range(4)), []) == batch


def test_epoch_orders_are_permutations_that_change_with_the_epoch():
    first, again, second = (epoch_order(30, 30, 0, e) for e in (1, 1, 2))
    assert torch.equal(first, again)
    assert not torch.equal(first, second)
    assert sorted(first.tolist()) == list(range(30))
    # More samples than data: whole permutations back to back.
    long = epoch_order(10, 25, 0, 1)
    assert sorted(long[:10].tolist()) == list(range(10))


def test_sequential_order_walks_through_fresh_indices_each_epoch():
    assert epoch_order(100, 8, 0, 1, shuffle=False).tolist() == list(range(8))
    assert epoch_order(100, 8, 0, 3, shuffle=False).tolist() == list(range(16, 24))
    assert epoch_order(20, 8, 0, 3, shuffle=False).tolist() == [16, 17, 18, 19, 0, 1, 2, 3]


def test_batch_must_split_evenly():
    with pytest.raises(ValueError, match="divisible by the number of processes"):
        RankBatchSampler(100, 64, 10, world_size=4)
    with pytest.raises(ValueError, match="at least one batch"):
        RankBatchSampler(100, 4, 8)
