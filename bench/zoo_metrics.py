"""How the model zoo (bench/model_zoo.py, bench/zoo_export.py) compares an output with PyTorch's float
output: NumPy only, one definition for the runs and the exporter's diagnostics.

- correlation: Pearson's, over every output of the batch;
- input-dependent correlation: the same after subtracting from each output its mean over the batch
  (per class, or per class and pixel for a map). A random-weight network's outputs are dominated
  by a per-class offset that hardly depends on the input (its biases and batch-norm shifts), which
  alone gives a high correlation even between unrelated inputs; this one measures the part of the
  output that the input decides;
- top-1 agreement: the fraction of argmaxes over axis 1 (the classes; a map's channels at each
  position) equal to PyTorch's.
"""
import numpy as np


def correlation(a, b):
    return float(np.corrcoef(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel())[0, 1])


def input_dependent_correlation(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return correlation(a - a.mean(0), b - b.mean(0))


def top1_agreement(a, b):
    return float(np.mean(np.asarray(a).argmax(1) == np.asarray(b).argmax(1)))


def compare(y, reference):
    """The figures of y against the reference output (both of the same shape, batch first)."""
    return {"correlation": correlation(y, reference),
            "input_dependent_correlation": input_dependent_correlation(y, reference),
            "top1_agreement": top1_agreement(y, reference)}
