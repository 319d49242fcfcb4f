"""The user layer: a functional API on NumPy arrays and PyTorch tensors, and the `aclnn`
command line (case files, golden data, the precision standard)."""
