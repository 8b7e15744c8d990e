"""Task-oriented features (issue 14): a person detector split between edge and cloud, and a
learned bottleneck that codes the features at the split."""
