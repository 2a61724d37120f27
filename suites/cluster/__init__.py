"""The cluster layer (marker `cluster`): both stations of a two-station recipe, their rails, RDMA and NCCL."""
