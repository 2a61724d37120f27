"""Two-process NCCL all-reduce, one process per GPU, for recording NCCL's INFO log on a real machine.

    NCCL_DEBUG=INFO python3 tools/nccl_allreduce.py [MAPS_OUT]

Rank 0 writes the libnccl files its process maps and torch's NCCL version to MAPS_OUT (default: stdout).
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank: int, world: int, port: int, maps_out: str | None) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, device_id=torch.device("cuda", rank)
    )
    x = torch.full((64 * 1024 * 1024,), float(rank + 1), device="cuda")  # 256 MiB of fp32
    dist.all_reduce(x)
    torch.cuda.synchronize()
    expected = world * (world + 1) / 2
    assert torch.all(x == expected), f"rank {rank}: all-reduce gave {x[0].item()}, expected {expected}"
    if rank == 0:
        with open("/proc/self/maps") as maps:
            libs = sorted({line.split()[-1] for line in maps if "nccl" in line.lower() and "/" in line})
        report = [
            f"# pid: {os.getpid()}",
            f"torch {torch.__version__} torch.cuda.nccl.version() = {torch.cuda.nccl.version()}",
            *libs,
            f"all_reduce of {x.numel()} fp32 = {x[0].item()} (expected {expected})",
        ]
        text = "\n".join(report) + "\n"
        if maps_out:
            with open(maps_out, "a") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # multicast stays off on shared hosts
    world = 2
    mp.spawn(
        worker,
        args=(world, int(os.environ.get("PORT", "29533")), sys.argv[1] if len(sys.argv) > 1 else None),
        nprocs=world,
    )
