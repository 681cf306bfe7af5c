import torch

# The suite's models are small: one intra-op thread avoids oversubscribing the cores (the CI machine
# has two, shared with worker processes some tests start), which makes eager PyTorch many times
# slower.
torch.set_num_threads(1)
