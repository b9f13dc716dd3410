#!/usr/bin/env python3
# Real NCCL (PyTorch's) driving libnccl-net-sumcast.so: WORLD ranks (default
# 2) on the one GPU, NCCL_HOSTID different so NCCL sees that many nodes and
# goes through the net plugin (and CollNet when NCCL_COLLNET_ENABLE=1).
# Every allreduce checked against the reference; rank 0 writes a line per
# size and type: bytes, type, ok | WRONG, mean time of the timed repeats.
#
#   nccl_torch_check.py OUT SIZES [WORLD]    (SIZES: elements, comma list)
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

def work(rank, world, port, sizes, out):
    os.environ["NCCL_HOSTID"] = f"sumcast-node-{rank}"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    res = []
    for n in sizes:
        for dt in (torch.float32, torch.bfloat16):
            x = (torch.arange(n, device="cuda", dtype=torch.float32) % 7 + rank + 1).to(dt)
            ref = sum((torch.arange(n, device="cuda", dtype=torch.float32) % 7 + r + 1)
                      for r in range(world)).to(dt)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            ok = torch.equal(x, ref)
            # time a few
            t0 = time.time(); it = 0
            while time.time() - t0 < 1.0 and it < 50:
                dist.all_reduce(x); it += 1
            torch.cuda.synchronize()
            dtm = (time.time() - t0) / max(it, 1)
            res.append((n * x.element_size(), str(dt), ok, dtm))
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            for b, dt, ok, t in res:
                f.write(f"{b} {dt} {'ok' if ok else 'WRONG'} {t*1e6:.1f}us\n")

if __name__ == "__main__":
    sizes = [int(s) for s in sys.argv[2].split(",")]
    world = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    mp.spawn(work, args=(world, 29511, sizes, sys.argv[1]), nprocs=world, join=True)
