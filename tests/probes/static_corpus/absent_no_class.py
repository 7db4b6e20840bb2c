# expect: absent -- no UnslothFusedLoss at all
# ruff: noqa
import torch


def unrelated(x):
    return x / 2
