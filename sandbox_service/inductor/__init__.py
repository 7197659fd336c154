"""The Inductor path: a reference compiled by TorchInductor, turned into a standalone Triton ModelNew."""
