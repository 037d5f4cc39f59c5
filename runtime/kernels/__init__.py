"""CPU kernels with tuning and buffers: what graph/ defines as ops, run fast on the host."""
