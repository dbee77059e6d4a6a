"""A Gluon kernel with two intra-kernel scopes, ``load`` and ``compute``.

Proton's ``pl.enter_scope`` instruments Gluon kernels by default (plain Triton kernels need
``pl.enable_semantic("triton")``). ``compute`` runs a 64-step FMA chain, so it should own most
cycles.
"""

import torch
import triton
import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

BLOCK = 1024
WARPS = 4


@gluon.jit
def scoped_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr, STEPS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[BLOCK // (32 * 4)], threads_per_warp=[32], warps_per_cta=[4], order=[0]
    )
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    pl.enter_scope("load")
    x = gl.load(x_ptr + offs, mask=mask)
    y = gl.load(y_ptr + offs, mask=mask)
    pl.exit_scope("load")
    pl.enter_scope("compute")
    acc = x
    for _ in gl.static_range(STEPS):
        acc = acc * 0.5 + y
    pl.exit_scope("compute")
    gl.store(out_ptr + offs, acc, mask=mask)


def main() -> None:
    n = 1 << 20
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    for _ in range(5):
        scoped_kernel[(triton.cdiv(n, BLOCK),)](
            x, y, out, n, BLOCK=BLOCK, STEPS=64, num_warps=WARPS
        )
    torch.cuda.synchronize()
    ref = x
    for _ in range(64):
        ref = ref * 0.5 + y
    torch.testing.assert_close(out, ref)
    print("gluon_scopes: PASS")


if __name__ == "__main__":
    main()
