"""A training loop that profiles itself, as many do, for ``aorta diagnose`` (README.md here).

Any number of gloo (CPU) or NCCL (GPU) ranks under torchrun: an MLP, its gradients all-reduced
by hand, ``torch.profiler`` recording steps 2-7 into ``$AORTA_TRIAL_DIR/profile`` under an aorta
sweep (else ``--out``). ``--slow-rank R --slow-ms N`` makes rank R sleep N ms per step outside
any op: the straggler the diagnosis should find, as host time.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--steps", type=int, default=9)
    args.add_argument("--slow-rank", type=int, default=-1)
    args.add_argument("--slow-ms", type=float, default=0.0)
    args.add_argument("--out", default="profile", help="the traces' folder outside a sweep")
    ns = args.parse_args()
    gpu = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if gpu else "cpu"
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpu else "gloo")
    rank = dist.get_rank()
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    trial = os.environ.get("AORTA_TRIAL_DIR")
    folder = os.path.join(trial, "profile") if trial else ns.out
    with torch.profiler.profile(
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=6),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(folder)) as prof:
        for _ in range(ns.steps):
            if rank == ns.slow_rank:
                time.sleep(ns.slow_ms / 1e3)
            model(torch.randn(64, 256, device=device)).square().sum().backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # torch 2.13 on the CPU aborts now and then in its C++ teardown at exit, after the work and
    # the traces are done ("terminate called without an active exception": 5 of 100 runs of this
    # script on 2 cores), and torchrun would report the run as failed: end without that teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
