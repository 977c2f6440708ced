#!/usr/bin/python3
"""scripts/golden/sortidx_values.py: prints PyTorch 1.13's results for the
cases of tests/ops/test_sortidx.c (the test holds them as literals):
    /usr/bin/python3 scripts/golden/sortidx_values.py"""
import warnings

import torch

warnings.filterwarnings('ignore')
nan = float('nan')
x = torch.tensor([[2., 1, 2, 3], [5, 5, 1, 1], [0, 7, 7, 7]])
print('mode dim 1', torch.mode(x, 1))
print('mode dim 0', torch.mode(x, 0))
y = torch.tensor([[1., nan, 3, 2], [nan, 5, nan, nan], [4, 1, nan, 0]])  # all-NaN rows: libstdc++'s nth_element picks the index
print('nanmedian dim 1', torch.nanmedian(y, 1))
print('nanmedian', torch.nanmedian(y))
b = torch.tensor([1., 3, 5, 7])
v = torch.tensor([[0., 1, 2], [5, 7, 9]])
print('bucketize', torch.bucketize(v, b), torch.bucketize(v, b, right=True))
s = torch.tensor([[1., 3, 5, 7], [2, 4, 6, 8]])
print('searchsorted rows', torch.searchsorted(s, v, side='right'))
srt = torch.tensor([7., 1, 5, 3])
print('searchsorted sorter', torch.searchsorted(srt, torch.tensor([4., 8]), sorter=torch.argsort(srt)))
u = torch.tensor([[3, 1], [2, 3], [3, 1], [0, 5]])
print('unique', torch.unique(u, sorted=True, return_inverse=True, return_counts=True))
print('unique dim 0', torch.unique(u, dim=0, return_inverse=True, return_counts=True))
print('unique_consecutive', torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 1, 3, 3]),
                                                     return_inverse=True, return_counts=True))
print('unique_consecutive dim 0', torch.unique_consecutive(
    torch.tensor([[1, 1, 2], [1, 1, 2], [0, 1, 2]]), return_inverse=True, return_counts=True, dim=0))
xs = torch.tensor([[1., 2, 3], [4, 5, 6]])
ix = torch.tensor([[0, 1, 0], [1, 1, 1]])
src = torch.tensor([[10., 20, 30], [40, 50, 60]])
for r in ['sum', 'prod', 'mean', 'amax', 'amin']:
    for inc in [True, False]:
        print('scatter_reduce', r, inc, torch.scatter_reduce(xs, 0, ix, src, r, include_self=inc)
              .flatten().tolist())
print('scatter_reduce int mean', torch.scatter_reduce(
    torch.tensor([[1, 2, 3], [4, 5, 6]]), 1, torch.tensor([[0, 0, 2], [1, 1, 1]]),
    torch.tensor([[-7, 2, 9], [3, 3, 4]]), 'mean').flatten().tolist())
print('index_reduce amax', torch.index_reduce(xs, 1, torch.tensor([2, 0, 2]), src, 'amax',
                                              include_self=False).flatten().tolist())
print('masked_select', torch.masked_select(xs, torch.tensor([True, False, True])).tolist())
print('masked_scatter', torch.masked_scatter(
    xs, torch.tensor([[True, False, True], [False, True, False]]), src).flatten().tolist())
print('put', torch.put(xs, torch.tensor([5, 0, -1]), torch.tensor([9., 8, 7]), accumulate=True)
      .flatten().tolist())
print('argwhere', torch.argwhere(torch.tensor([[0., 1], [2, 0]])).tolist())
print('diagonal_scatter', torch.diagonal_scatter(torch.zeros(3, 4), torch.tensor([1., 2, 3]), 1)
      .flatten().tolist())
print('slice_scatter', torch.slice_scatter(torch.zeros(3, 4), torch.ones(3, 2), 1, 1, None, 2)
      .flatten().tolist())
